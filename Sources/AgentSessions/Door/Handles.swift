import Foundation

/// Where front ends get the handles, the records, and the writes that are not a handle's.
extension AgentOrchestrator {
    /// The records, read only.
    public var records: AgentRecords { AgentRecords(store: store) }

    /// The task with this id (nothing is read until the handle is used).
    public func task(_ id: TaskID) -> TaskHandle { TaskHandle(id: id, engine: self) }

    /// The chat with this id.
    public func chat(_ id: ChatID) -> ChatHandle { ChatHandle(id: id, engine: self) }

    /// The host with this id.
    public func host(_ id: HostID) -> HostHandle { HostHandle(id: id, engine: self) }

    /// The project with this id.
    public func project(_ id: ProjectID) -> ProjectHandle { ProjectHandle(id: id, engine: self) }

    /// Refuses a name another host has (`nameTaken`): the one rule of host names, for a
    /// front end to check before it connects to a new host.
    public func checkHostName(_ name: String) async throws(AgentError) {
        if try await records.hosts().contains(where: { $0.name == name }) {
            throw AgentError(.nameTaken, "a host named \(name) exists already; remove it first or pick another name")
        }
    }

    /// Records a host (after the front end connected to it and checked its key, see
    /// `inspectNewHost`).
    /// - Throws: `nameTaken`, `storage`.
    @discardableResult
    public func addHost(_ record: HostRecord) async throws(AgentError) -> HostHandle {
        try await checkHostName(record.name)
        try await stored("saving the host") { try await store.save(record) }
        return host(record.id)
    }

    /// Forgets tasks the store is about to lose with their host or project: their open
    /// ports and their chats' session-map entries.
    func forget(_ tasks: [TaskRecord]) async throws(AgentError) {
        for t in tasks {
            await portForwards.close(t.id)
            let chats = try await records.chats(of: t.id)
            try await stored("removing the session map entries") {
                for c in chats { try await store.remove(c.ptyID.description) }
            }
        }
    }
}
