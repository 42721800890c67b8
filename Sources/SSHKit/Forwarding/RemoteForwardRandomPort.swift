import Logging

/// Port 0 for a remote forward. The port is picked here, not by the server: libssh 0.10
/// reads a port the server chooses from whatever packet it processed last, which is wrong
/// whenever another channel's data arrived right behind the answer.
///
/// A pick is checked as well as asked for. For `localhost` sshd binds each loopback
/// address (127.0.0.1 and ::1) and reports success when one bind worked, so a random port
/// that another process holds on 127.0.0.1 looks forwarded while connections to it reach
/// that process. The check opens a connection to the port on each loopback through the
/// server (`direct-tcpip`): it must come back through this forward, which answers with
/// bytes nobody else knows. Nothing is written to whatever else answers.
enum RemoteForwardRandomPort {
    /// Below Linux's ephemeral range (32768...60999), from which the kernel picks every
    /// outgoing connection's local port.
    static let range = 20000...32767
    static let tries = 8
    /// How long a check waits for its connection to come back through the forward
    /// (only a port another process holds and keeps silent on waits this long).
    static let checkTimeout: Duration = .seconds(5)
    static let loopbacks = ["127.0.0.1", "::1"]

    /// Bind addresses sshd turns into more than one socket, succeeding when one worked.
    static func needsCheck(_ bindAddress: String) -> Bool {
        ["localhost", "", "*"].contains(bindAddress.lowercased())
    }
}

extension SSHConnection {
    func startRemoteForwardOnRandomPort(bindAddress: String, options: SSHForwardOptions,
                                        mode: RemoteForwardBook.Mode) async throws(SSHError) -> SSHRemoteForward {
        var first = options.firstRandomPorts
        var tried: Set<Int> = []
        var misses: [String] = []
        for _ in 0..<RemoteForwardRandomPort.tries {
            let port = first.isEmpty ? Self.randomPort(excluding: tried) : first.removeFirst()
            tried.insert(port)
            let book = RemoteForwardBook(mode: mode, options: options, logger: logger)
            do throws(SSHError) {
                _ = try await book.start(on: core, address: bindAddress, port: port)
            } catch {
                guard error.code == .forwardingRefused else { throw error }
                misses.append("\(port) refused")
                continue
            }
            if RemoteForwardRandomPort.needsCheck(bindAddress) {
                let elsewhere = await book.checkReach(through: self, port: port)
                if elsewhere != nil || Task.isCancelled {
                    book.stop(reason: nil)
                    _ = await book.waitUntilStopped(cancellable: false)
                }
                if Task.isCancelled { throw SSHError(.cancelled, "remote forward cancelled") }
                if let elsewhere {
                    logger.debug("random remote port held elsewhere", metadata: ["port": "\(port)", "found": "\(elsewhere)"])
                    misses.append("\(port): \(elsewhere)")
                    continue
                }
            }
            logger.debug("remote forward listening", metadata: ["bind": "\(bindAddress):\(port)"])
            return SSHRemoteForward(bindAddress: bindAddress, port: port, book: book)
        }
        throw SSHError(.forwardingRefused, "tcpip-forward \(bindAddress): no random port worked (\(misses.joined(separator: "; ")))")
    }

    private static func randomPort(excluding tried: Set<Int>) -> Int {
        while true {
            let port = Int.random(in: RemoteForwardRandomPort.range)
            if !tried.contains(port) { return port }
        }
    }
}

extension RemoteForwardBook {
    /// Whether connections to `port` on the server's loopback addresses come back through
    /// this forward: nil when they do or cannot be made at all (nothing listens on that
    /// address, or the server opens no tunnels: nothing to compare), else what answered.
    func checkReach(through connection: SSHConnection, port: Int) async -> String? {
        let nonce = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        beginReachCheck(nonce)
        defer { endReachCheck() }
        return await withTaskGroup(of: String?.self) { group in
            for host in RemoteForwardRandomPort.loopbacks {
                group.addTask { await Self.reaches(connection, host: host, port: port, nonce: nonce) }
            }
            var found: String?
            for await answer in group where found == nil {
                found = answer
            }
            return found
        }
    }

    private static func reaches(_ connection: SSHConnection, host: String, port: Int, nonce: [UInt8]) async -> String? {
        let tunnel: SSHTunnel
        do {
            tunnel = try await connection.openTunnel(toHost: host, port: port)
        } catch {
            return nil
        }
        let timer = Task {
            try? await Task.sleep(for: RemoteForwardRandomPort.checkTimeout)
            tunnel.cancel()
        }
        defer {
            timer.cancel()
            tunnel.cancel()
        }
        let name = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var got: [UInt8] = []
        do {
            for try await chunk in tunnel.output {
                got += chunk
                if got.count >= nonce.count { break }
            }
        } catch {
            return got.isEmpty ? "\(name) took the connection and stayed silent" : "\(name) answered with other bytes"
        }
        if got.starts(with: nonce) { return nil }
        return got.isEmpty ? "\(name) took the connection and closed it" : "\(name) answered with other bytes"
    }
}
