// Local forwarding workloads: the same TCP client, in this process, through an SSHKit
// forward and through `ssh -N -L` (OpenSSH) to servers in this process, alternating.
import Foundation
import LibSSHBaseline
import SSHKit

let forwardImplementations = implementations.map { $0 == "OpenSSH" ? "ssh -L" : $0 }

/// A TCP server on 127.0.0.1 with a thread per connection: `source` sends `bytes` and
/// closes; otherwise it echoes until EOF.
final class BenchServer: @unchecked Sendable {  // safe because: immutable after init
    let port: Int
    private let fd: Int32

    init(source bytes: Int?) throws {
        let (fd, port) = try loopbackListener(backlog: 512)
        self.fd = fd
        self.port = port
        let listener = fd
        Thread.detachNewThread {
            while true {
                let c = accept(listener, nil, nil)
                if c < 0 { if errno == EINTR { continue }; return }
                Thread.detachNewThread { bytes.map { Self.source(c, $0) } ?? Self.echo(c) }
            }
        }
    }

    private static func source(_ c: Int32, _ total: Int) {
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        var left = total
        while left > 0 {
            let n = chunk.withUnsafeBytes { write(c, $0.baseAddress!, min(left, $0.count)) }
            if n <= 0 { break }
            left -= n
        }
        close(c)
    }

    private static func echo(_ c: Int32) {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(c, &buf, buf.count)
            if n <= 0 { break }
            _ = buf.withUnsafeBytes { write(c, $0.baseAddress!, n) }
        }
        close(c)
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

/// A listening TCP socket on 127.0.0.1 with a free port.
func loopbackListener(backlog: Int32) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, len) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &len) == 0
        }
    }
    guard ok else { close(fd); throw BenchError("cannot listen on 127.0.0.1") }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
}

func connectLoopback(_ port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if rc != 0 { close(fd); return -1 }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return fd
}

func freeLoopbackPort() -> Int {
    let s = try? BenchServer(source: 0)
    defer { s?.stop() }
    return s?.port ?? 0
}

/// Reads a forwarded download to its end; the byte count.
func drain(_ fd: Int32) -> Int {
    var buf = [UInt8](repeating: 0, count: 1 << 18)
    var total = 0
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        total += n
    }
    close(fd)
    return total
}

/// One connection's setup and first byte: connect, send 1 byte, read it back, close.
func pingOnce(_ port: Int) throws -> Double {
    let t0 = now()
    let fd = connectLoopback(port)
    guard fd >= 0 else { throw BenchError("connect to the forward failed") }
    var b: UInt8 = 7
    guard write(fd, &b, 1) == 1, read(fd, &b, 1) == 1 else { close(fd); throw BenchError("ping through the forward failed") }
    close(fd)
    return now() - t0
}

func benchForward(_ f: Fixture, mebibytes: Int, rounds: Int, connections: Int) async throws -> [Row] {
    var throughput = Row(workload: "download \(mebibytes) MiB through a local forward, \(cipher) (MB/s)")
    var setup = Row(workload: "new forwarded connection + 1-byte round trip, \(connections) sequential (ms)")
    let source = try BenchServer(source: mebibytes << 20)
    let echo = try BenchServer(source: nil)
    defer { source.stop(); echo.stop() }

    let conn = try await SSHClient.connect(f.sshkitCipherConfig)
    var options = SSHForwardOptions()
    if let kib = ProcessInfo.processInfo.environment["SSHKIT_BENCH_FWD_BUFFER_KIB"].flatMap(Int.init) {
        options.bufferLimit = kib * 1024 // for experiments
    }
    let fwdSource = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: source.port), options: options)
    let fwdEcho = try conn.forwardLocalPort(to: .tcp(host: "127.0.0.1", port: echo.port))

    let sshSource = freeLoopbackPort(), sshEcho = freeLoopbackPort()
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    guard let ssh = spawn(f.sshArgs(["-N", "-c", cipher, "-o", "ExitOnForwardFailure=yes",
                                     "-L", "127.0.0.1:\(sshSource):127.0.0.1:\(source.port)",
                                     "-L", "127.0.0.1:\(sshEcho):127.0.0.1:\(echo.port)"]), &actions)
    else { throw BenchError("ssh -L did not start") }
    defer {
        kill(ssh, SIGTERM)
        var st: Int32 = 0
        waitpid(ssh, &st, 0)
    }
    // wait until ssh listens
    let deadline = now() + 10_000
    while now() < deadline {
        let fd = connectLoopback(sshEcho)
        if fd >= 0 { close(fd); break }
        usleep(20_000)
    }

    let ports = ["SSHKit": (fwdSource.port!, fwdEcho.port!), "ssh -L": (sshSource, sshEcho)]
    let expected = mebibytes << 20
    // libssh C: one blocking direct-tcpip channel copied to a socket pair whose other end
    // this process drains: the same path as a forward's download, without a listener
    let lsb = try LibSSHSession(f, cipher: cipher)
    for i in 0..<rounds {
        for impl in rotated(forwardImplementations, by: i) {
            lsb_callgrind_dump("before \(impl), round \(i)")
            let t0 = now()
            let got: Int
            if impl == "libssh C" {
                var sv: [Int32] = [-1, -1]
                guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sv) == 0 else { throw BenchError("socketpair") }
                let writer = sv[0], port = source.port
                Thread.detachNewThread {
                    _ = lsb_forward_to_fd(lsb.raw, "127.0.0.1", Int32(port), writer)
                    close(writer)
                }
                got = drain(sv[1])
            } else {
                let fd = connectLoopback(ports[impl]!.0)
                guard fd >= 0 else { throw BenchError("\(impl): connect failed") }
                got = drain(fd)
            }
            guard got == expected else { throw BenchError("\(impl): \(got) of \(expected) bytes") }
            throughput.samples[impl, default: []].append(Double(expected) / 1e6 / ((now() - t0) / 1000))
            lsb_callgrind_dump("forward \(mebibytes) MiB, \(impl), round \(i)")
            guard impl != "libssh C" else { continue }
            for _ in 0..<(connections / rounds) {
                setup.samples[impl, default: []].append(try pingOnce(ports[impl]!.1))
            }
        }
    }
    await fwdSource.close()
    await fwdEcho.close()
    await conn.close()
    return [throughput, setup]
}

func reportForward(_ rows: [Row]) {
    func f(_ x: Double) -> String { x.isNaN ? "—" : String(format: x < 10 ? "%.2f" : "%.1f", x) }
    func ratio(_ x: Double) -> String { x.isNaN ? "—" : String(format: "%.2fx", x) }
    out()
    out("| workload | SSHKit median | libssh C median | ssh -L median | SSHKit / libssh C | SSHKit / ssh -L |")
    out("|---|---|---|---|---|---|")
    for r in rows {
        let m = ["SSHKit", "libssh C", "ssh -L"].map { median(r.samples[$0] ?? []) }
        out("| \(r.workload) | \(f(m[0])) (p90 \(f(percentile(r.samples["SSHKit"] ?? [], 0.9)))) | \(f(m[1])) | \(f(m[2])) | \(ratio(m[0] / m[1])) | \(ratio(m[0] / m[2])) |")
    }
    out("samples per implementation: " + rows.map { r in forwardImplementations.map { "\($0) \(r.samples[$0]?.count ?? 0)" }.joined(separator: ", ") }.joined(separator: " | "))
}
