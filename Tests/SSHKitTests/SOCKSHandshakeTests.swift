@testable import SSHKit
import Testing

/// The SOCKS parser alone: every message split at every byte boundary, and bad input.
@Suite("SOCKS handshake", .tags(.pure))
struct SOCKSHandshakeTests {
    /// Feeds `bytes` one at a time and returns the replies sent and the final step.
    func feedBytewise(_ bytes: [UInt8]) -> (replies: [UInt8], last: SOCKSHandshake.Step) {
        var h = SOCKSHandshake()
        var replies: [UInt8] = []
        var last = SOCKSHandshake.Step.needMore(reply: [])
        for b in bytes {
            last = h.feed([b])
            switch last {
            case .needMore(let r): replies += r
            case .connect, .reject: return (replies, last)
            }
        }
        return (replies, last)
    }

    @Test func socks5DomainIPv4AndIPv6RequestsParseFromAnySplit() {
        let cases: [([UInt8], String, Int)] = [
            ([5, 1, 0x03, 3, 9] + Array("localhost".utf8) + [0x1F, 0x90], "localhost", 8080),
            ([5, 1, 0, 1, 10, 0, 0, 7, 0, 22], "10.0.0.7", 22),
            ([5, 1, 0, 4] + [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1, 0x01, 0xBB], "2001:db8:0:0:0:0:0:1", 443),
        ]
        for (request, host, port) in cases {
            let greeting: [UInt8] = [5, 2, 2, 0]
            // byte by byte
            let (replies, last) = feedBytewise(greeting + request + [0xAA])
            #expect(replies == [5, 0])
            #expect(last == .connect(host: host, port: port, version: .socks5, leftover: [], reply: []))
            // all at once, with early data behind it
            var h = SOCKSHandshake()
            #expect(h.feed(greeting + request + [1, 2]) ==
                    .connect(host: host, port: port, version: .socks5, leftover: [1, 2], reply: [5, 0]))
        }
    }

    @Test func socks4AndSocks4aParse() {
        var (_, last) = feedBytewise([4, 1, 0, 80, 192, 168, 1, 2] + Array("me".utf8) + [0])
        #expect(last == .connect(host: "192.168.1.2", port: 80, version: .socks4, leftover: [], reply: []))
        (_, last) = feedBytewise([4, 1, 1, 0, 0, 0, 0, 9, 0] + Array("db.internal".utf8) + [0])
        #expect(last == .connect(host: "db.internal", port: 256, version: .socks4a, leftover: [], reply: []))
    }

    @Test func badInputIsRejectedWithTheVersionsErrorReply() {
        func rejectReply(_ bytes: [UInt8]) -> [UInt8]? {
            var h = SOCKSHandshake()
            if case .reject(let reply, _) = h.feed(bytes) { return reply }
            return nil
        }
        #expect(rejectReply([0x47, 0x45, 0x54]) == [])                       // "GET": not SOCKS
        #expect(rejectReply([5, 1, 2]) == [5, 0xFF])                         // no acceptable method
        #expect(rejectReply([5, 1, 0, 5, 3, 0, 1, 1, 2, 3, 4, 0, 1]) == [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]) // UDP
        #expect(rejectReply([5, 1, 0, 5, 1, 0, 7]) == [5, 0, 5, 8, 0, 1, 0, 0, 0, 0, 0, 0]) // address type
        #expect(rejectReply([5, 1, 0, 5, 1, 0, 3, 0, 0, 80]) == [5, 0, 5, 1, 0, 1, 0, 0, 0, 0, 0, 0]) // empty name
        #expect(rejectReply([5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 0]) == [5, 0, 5, 1, 0, 1, 0, 0, 0, 0, 0, 0]) // port 0
        #expect(rejectReply([5, 1, 0, 5, 1, 0, 3, 3, 0x61, 0x0A, 0x62, 0, 80]) == [5, 0, 5, 1, 0, 1, 0, 0, 0, 0, 0, 0]) // control char
        #expect(rejectReply([4, 2, 0, 80, 1, 2, 3, 4, 0]) == [0, 0x5B, 0, 0, 0, 0, 0, 0])  // BIND
        #expect(rejectReply([4, 1, 0, 80, 0, 0, 0, 1, 0, 0]) == [0, 0x5B, 0, 0, 0, 0, 0, 0]) // 4a, empty name
        #expect(rejectReply([4, 1, 0, 80, 1, 2, 3, 4] + [UInt8](repeating: 0x41, count: 1100)) == [0, 0x5B, 0, 0, 0, 0, 0, 0])
    }

    @Test func failureRepliesFollowTheServersReason() {
        func code(_ message: String) -> UInt8 {
            var e = SSHError(.channelOpenFailed, "channel open refused")
            e.libssh = .init(function: "ssh_channel_open_forward", code: 1, message: message)
            return SOCKSHandshake.failure(.socks5, error: e)[1]
        }
        #expect(code("Channel opening failure: channel 3 error (2) Connection refused") == 5)
        #expect(code("Channel opening failure: channel 3 error (2) No route to host") == 4)
        #expect(code("Channel opening failure: channel 3 error (2) Name or service not known") == 4)
        #expect(code("Channel opening failure: channel 3 error (1) administratively prohibited: open failed") == 2)
        // OpenSSH's own text for a PermitOpen refusal: only the reason code says "not allowed"
        #expect(code("Channel opening failure: channel 3 error (1) open failed") == 2)
        #expect(code("something else") == 1)
        #expect(SOCKSHandshake.failure(.socks4a, error: SSHError(.cancelled, "x")) == [0, 0x5B, 0, 0, 0, 0, 0, 0])
    }
}
