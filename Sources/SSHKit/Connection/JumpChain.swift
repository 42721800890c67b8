/// Connections through jump hosts (`ssh -J a,b target`).
///
/// Each hop after the first runs over a socket pair: one end is bridged, inside the
/// previous hop's worker, to a `direct-tcpip` channel to the next host; the next
/// connection's core owns the other end as its socket. No `ssh` process is forked, and
/// every hop verifies its own host key and authenticates with its own configuration.
///
/// Cancelling the connecting task cancels whatever hop is in progress (its connect or
/// its channel open) and closes the hops before it. Later, a hop that fails takes the
/// hops after it down with it: their sockets see EOF, so they fail with `disconnected`.
enum JumpChain {
    static func connect(_ configuration: SSHConfiguration) async throws(SSHError) -> SSHConnection {
        var hops: [SSHConnection] = []
        var bridges: [CoreBridge] = []
        var targets = configuration.jumpHosts.dropFirst().map { $0 }
        var last = configuration
        last.jumpHosts = []
        targets.append(last)
        do throws(SSHError) {
            hops.append(try await SSHClient.connectDirectly(configuration.jumpHosts[0]))
            for next in targets {
                let via = hops[hops.count - 1]
                let opened = try await socket(to: next, through: via)
                bridges.append(opened.bridge)
                var hop = next
                hop.connectedSocket = opened.fd
                let conn: SSHConnection
                do throws(SSHError) {
                    conn = try await CoreConnection.connect(hop, jumpConnections: hops, jumpBridges: bridges)
                } catch {
                    throw saying(error, through: via)
                }
                via.logger.debug("jump: connected", metadata: ["via": "\(via.host):\(via.port)", "to": "\(next.host):\(next.port)"])
                hops.append(conn)
            }
            return hops[hops.count - 1]
        } catch {
            for bridge in bridges.reversed() { bridge.cancel() }
            for hop in hops.reversed() { await hop.close() }
            throw error
        }
    }

    /// One hop to `next` through an open connection that the new one does not own:
    /// closing the new connection leaves `via` open (a jump host shared by many targets).
    static func connect(_ next: SSHConfiguration, through via: SSHConnection) async throws(SSHError) -> SSHConnection {
        let opened = try await socket(to: next, through: via)
        var hop = next
        hop.jumpHosts = []
        hop.connectedSocket = opened.fd
        do throws(SSHError) {
            return try await CoreConnection.connect(hop, jumpBridges: [opened.bridge])
        } catch {
            opened.bridge.cancel()
            throw saying(error, through: via)
        }
    }

    /// A socket whose other end is bridged, inside `via`'s worker, to a `direct-tcpip`
    /// channel to `next`: the next hop's connection owns it.
    private static func socket(to next: SSHConfiguration, through via: SSHConnection)
        async throws(SSHError) -> (fd: Int32, bridge: CoreBridge)
    {
        do throws(SSHError) {
            return try await via.core.openBridgedSocket(
                to: DirectTarget(unixSocket: false, host: next.host, port: next.port,
                                 originatorHost: "127.0.0.1", originatorPort: 0),
                bufferLimit: 2 << 20)
        } catch {
            throw hopError(error, via: via, next: next)
        }
    }

    /// A hop's failure to connect or log in, saying which jump host it went through.
    private static func saying(_ error: SSHError, through via: SSHConnection) -> SSHError {
        var e = error
        e.message += " (through jump host \(via.host):\(via.port))"
        return e
    }

    /// What a failed channel open through `via` means for the hop to `next`: the server's
    /// reason ("Connection refused", "No route to host", a name it could not resolve)
    /// becomes the code a direct connect would have given.
    static func hopError(_ error: SSHError, via: SSHConnection, next: SSHConfiguration) -> SSHError {
        var e = error
        if error.code == .channelOpenFailed {
            let reason = (error.libssh?.message ?? error.message).lowercased()
            if reason.contains("connection refused") {
                e.code = .connectionRefused
            } else if reason.contains("no route") || reason.contains("unreachable") {
                e.code = .hostUnreachable
            } else if reason.contains("name or service") || reason.contains("name resolution")
                || reason.contains("no address") || reason.contains("not known") {
                e.code = .nameResolutionFailed
            } else if reason.contains("timed out") {
                e.code = .connectTimeout
            }
        }
        e.message = "jump host \(via.host):\(via.port) could not connect to \(next.host):\(next.port): \(error.message)"
        e.host = next.host
        e.port = next.port
        return e
    }
}
