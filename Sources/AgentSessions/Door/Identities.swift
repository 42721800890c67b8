import Foundation

/// What the identities of the engine's records share: a string (a lowercase UUID for
/// records the engine makes) that only compares with identities of its own kind, so a
/// task's id cannot be passed where a chat's is asked for.
public protocol RecordIdentity: Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The id as the store and the host keep it (tmux session names, worktree claims).
    var rawValue: String { get }
    init(_ rawValue: String)
}

extension RecordIdentity {
    /// A new id: a lowercase UUID, valid as a PTY-id suffix and a tmux name.
    public static func make() -> Self { Self(UUID().uuidString.lowercased()) }
    public init(stringLiteral value: String) { self.init(value) }
    public var description: String { rawValue }
    /// The first 8 characters: what lists show and what a user types to name it.
    public var short: String { String(rawValue.prefix(8)) }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A host's identity (`HostRecord.id`); also its `ServerID` in the connection monitor.
public struct HostID: RecordIdentity {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A project's identity (`ProjectRecord.id`).
public struct ProjectID: RecordIdentity {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A task's identity (`TaskRecord.id`): also the suffix of its main agent's PTY id.
public struct TaskID: RecordIdentity {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A chat's identity (`ConversationRecord.id`): the main agent of a task or an added chat.
public struct ChatID: RecordIdentity {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}
