import Foundation
import Synchronization

/// The server's view of the paired devices: read again whenever the file changes (a
/// `serve pair` or `serve devices --revoke` in another process), with the open sockets of
/// each device, which end at once when it is revoked.
final class DeviceGate: Sendable {
    let state: ServeState
    private struct Known {
        var stamp: timespec?
        var byHash: [String: ServeDevice] = [:]
    }

    private let known = Mutex(Known())
    private let sockets = Mutex<(next: UInt64, open: [UInt64: (device: String, end: @Sendable () -> Void)])>((0, [:]))
    private let failures = Mutex<[Date]>([])
    /// Failed pairings allowed per minute; more are refused without being tried.
    static let pairingAttemptsPerMinute = 5

    init(state: ServeState) {
        self.state = state
    }

    /// The device a cookie's token belongs to.
    func device(token: String?) -> ServeDevice? {
        guard let token, !token.isEmpty else { return nil }
        refresh()
        return known.withLock { $0.byHash[ServeState.hash(token)] }
    }

    /// Reads the devices again when the file changed; ends the sockets of devices gone.
    func refresh() {
        let stamp = state.devicesStamp()
        let changed = known.withLock { k in
            guard let stamp else { return k.stamp != nil || !k.byHash.isEmpty }
            guard let old = k.stamp else { return true }
            return old.tv_sec != stamp.tv_sec || old.tv_nsec != stamp.tv_nsec
        }
        guard changed else { return }
        let devices = (try? state.devices()) ?? []
        let ids = Set(devices.map(\.id))
        known.withLock { k in
            k.stamp = stamp
            k.byHash = Dictionary(devices.map { ($0.tokenHash, $0) }, uniquingKeysWith: { a, _ in a })
        }
        let gone = sockets.withLock { s in s.open.filter { !ids.contains($0.value.device) } }
        for (id, entry) in gone {
            _ = sockets.withLock { $0.open.removeValue(forKey: id) }
            entry.end()
        }
    }

    /// Keeps `end` to run if `device` is revoked while its socket is open; returns the key
    /// to `forget` it by when the socket closes.
    func opened(device: String, end: @escaping @Sendable () -> Void) -> UInt64 {
        sockets.withLock { s in
            s.next += 1
            s.open[s.next] = (device, end)
            return s.next
        }
    }

    func forget(_ key: UInt64) {
        _ = sockets.withLock { $0.open.removeValue(forKey: key) }
    }

    var openSockets: Int { sockets.withLock { $0.open.count } }

    /// Whether another pairing may be tried now (a limited number fail per minute).
    func mayTryPairing(now: Date = Date()) -> Bool {
        failures.withLock { f in
            f.removeAll { now.timeIntervalSince($0) > 60 }
            return f.count < Self.pairingAttemptsPerMinute
        }
    }

    func pairingFailed(now: Date = Date()) {
        failures.withLock { $0.append(now) }
    }
}
