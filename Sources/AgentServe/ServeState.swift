import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A browser or phone that was paired: it holds a random token in a cookie; the server
/// keeps only the token's SHA-256.
public struct ServeDevice: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var tokenHash: String
    public var pairedAt: Date
    public var lastSeenAt: Date?
}

/// What `serve` keeps beside the store, in a 0700 directory of 0600 files, each replaced
/// whole (written aside, then renamed) under a lock, since `serve pair` and `serve devices`
/// run as other processes than the server:
///
/// - `devices.json`: the paired devices (a revoked one is removed);
/// - `pairing.json`: the one-time codes `serve pair` made (their SHA-256, when they expire,
///   whether they were used);
/// - `audit.jsonl`: every pairing, refusal and action, with its device;
/// - `vapid.json`: the server's Web Push (VAPID) key, made on first use;
/// - `push.json`: the devices' push subscriptions.
public final class ServeState: Sendable {
    public let directory: String
    /// How long a pairing code is valid.
    public static let codeLifetime: TimeInterval = 300

    struct PairingCode: Codable {
        var codeHash: String
        var expiresAt: Date
        var usedAt: Date?
    }

    /// Opens (making it when missing) the directory.
    public init(directory: String) throws(ServeError) {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            _ = chmod(directory, 0o700)
        } catch {
            throw ServeError(.storage, "cannot make \(directory): \(error.localizedDescription)")
        }
    }

    /// The directory beside a store file: `<store's directory>/serve`.
    public static func directory(besideStore storePath: String) -> String {
        (storePath as NSString).deletingLastPathComponent + "/serve"
    }

    var devicesPath: String { directory + "/devices.json" }
    var pairingPath: String { directory + "/pairing.json" }
    var auditPath: String { directory + "/audit.jsonl" }

    // MARK: pairing

    /// A new one-time code (8 letters and digits that cannot be mistaken for each other,
    /// shown as two groups of four), valid for `codeLifetime`; expired codes are dropped.
    public func newPairingCode(now: Date = Date()) throws(ServeError) -> String {
        let alphabet = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789")
        var rng = SystemRandomNumberGenerator()
        let raw = String((0..<8).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] })
        let code = raw.prefix(4) + "-" + raw.suffix(4)
        try locked { () throws(ServeError) in
            var codes: [PairingCode] = try read(pairingPath) ?? []
            codes.removeAll { $0.expiresAt < now }
            codes.append(PairingCode(codeHash: Self.hash(Self.normalized(String(code))), expiresAt: now + Self.codeLifetime))
            try write(codes, to: pairingPath)
        }
        return String(code)
    }

    /// Takes a code: a device named `name` when it is valid, unused and unexpired (it is
    /// then used up), with the token for its cookie.
    /// - Throws: `pairingRefused` naming why.
    public func pair(code: String, name: String, now: Date = Date()) throws(ServeError) -> (device: ServeDevice, token: String) {
        let wanted = Self.hash(Self.normalized(code))
        return try locked { () throws(ServeError) -> (ServeDevice, String) in
            var codes: [PairingCode] = try read(pairingPath) ?? []
            guard let i = codes.firstIndex(where: { $0.codeHash == wanted }) else {
                throw ServeError(.pairingRefused, "no such pairing code")
            }
            if codes[i].usedAt != nil { throw ServeError(.pairingRefused, "this pairing code was used already") }
            if codes[i].expiresAt < now { throw ServeError(.pairingRefused, "this pairing code expired") }
            codes[i].usedAt = now
            try write(codes, to: pairingPath)
            let token = Self.randomToken()
            let device = ServeDevice(id: Self.randomDeviceID(),
                                     name: name.isEmpty ? "a device" : String(name.prefix(80)),
                                     tokenHash: Self.hash(token), pairedAt: now, lastSeenAt: now)
            var devices: [ServeDevice] = try read(devicesPath) ?? []
            devices.append(device)
            try write(devices, to: devicesPath)
            return (device, token)
        }
    }

    // MARK: devices

    /// The paired devices.
    public func devices() throws(ServeError) -> [ServeDevice] {
        try locked { () throws(ServeError) in try read(devicesPath) ?? [] }
    }

    /// Removes the device whose id is `id` or starts with it.
    /// - Throws: `notFound`, or `invalidArgument` when more than one starts so.
    @discardableResult
    public func revoke(_ id: String) throws(ServeError) -> ServeDevice {
        try locked { () throws(ServeError) -> ServeDevice in
            var devices: [ServeDevice] = try read(devicesPath) ?? []
            let matching = devices.filter { $0.id == id || (!id.isEmpty && $0.id.hasPrefix(id)) }
            guard let device = matching.first else { throw ServeError(.notFound, "no device \(id)") }
            guard matching.count == 1 else { throw ServeError(.invalidArgument, "\(id) starts more than one device's id") }
            devices.removeAll { $0.id == device.id }
            try write(devices, to: devicesPath)
            // and its push subscriptions
            var subscriptions: [PushSubscription] = try read(pushPath) ?? []
            if subscriptions.contains(where: { $0.device == device.id }) {
                subscriptions.removeAll { $0.device == device.id }
                try write(subscriptions, to: pushPath)
            }
            return device
        }
    }

    /// When the devices file last changed (to reread it only then).
    func devicesStamp() -> timespec? {
        var st = stat()
        guard stat(devicesPath, &st) == 0 else { return nil }
        return st.st_mtim
    }

    // MARK: the audit log

    /// One line in the audit log: when, which device (or "-"), what, and how it ended.
    public func audit(device: String?, action: String, target: String? = nil, outcome: String) {
        struct Line: Encodable {
            var at: Date
            var device: String
            var action: String
            var target: String?
            var outcome: String
        }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard var data = try? encoder.encode(Line(at: Date(), device: device ?? "-", action: action, target: target,
                                                  outcome: outcome)) else { return }
        data.append(0x0A)
        let fd = open(auditPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// The audit log's lines, oldest first.
    public func auditLines() -> [String] {
        ((try? String(contentsOfFile: auditPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    // MARK: helpers

    static func hash(_ s: String) -> String {
        SHA256.hash(data: Data(s.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func normalized(_ code: String) -> String {
        code.uppercased().filter { $0.isLetter || $0.isNumber }
    }

    /// A device's id: eight lowercase hex digits (never a `-` first, which a command line
    /// would read as an option).
    static func randomDeviceID() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &rng)) }.joined()
    }

    static func randomToken() -> String {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        return WebPushCrypto.base64url(Data(bytes))
    }

    func locked<R>(_ body: () throws(ServeError) -> R) throws(ServeError) -> R {
        let fd = open(directory + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ServeError(.storage, "cannot open \(directory)/.lock: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
        return try body()
    }

    func read<T: Decodable>(_ path: String) throws(ServeError) -> T? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(T.self, from: data)
        } catch {
            throw ServeError(.storage, "\(path) cannot be read: \(error.localizedDescription)")
        }
    }

    func write<T: Encodable>(_ value: T, to path: String) throws(ServeError) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let aside = path + ".new"
        do {
            let data = try encoder.encode(value)
            unlink(aside)
            let fd = open(aside, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw ServeError(.storage, "cannot write \(aside): \(String(cString: strerror(errno)))") }
            let ok = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) == $0.count } && fsync(fd) == 0
            close(fd)
            guard ok, rename(aside, path) == 0 else {
                unlink(aside)
                throw ServeError(.storage, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
        } catch let e as ServeError {
            throw e
        } catch {
            throw ServeError(.storage, "cannot write \(path): \(error.localizedDescription)")
        }
    }
}

/// What `serve` and its subcommands fail with.
public struct ServeError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case storage, pairingRefused, notFound, invalidArgument, listen
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
