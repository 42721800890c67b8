import Foundation
import Logging
import MCP

/// The MCP server's stdin and stdout, newline-delimited JSON-RPC as the protocol's stdio
/// transport says, read by a thread of its own that blocks in `read`: a message is
/// handled the moment it arrives, and an idle server wakes for nothing. (The SDK's
/// `StdioTransport` polls non-blocking descriptors every 10 ms: 5 ms more per call on
/// average, a hundred wake-ups a second while idle.) Standard input's end ends the stream.
actor MCPStdio: Transport {
    nonisolated let logger = Logger(label: "agent-sessions.mcp.stdio", factory: { _ in SwiftLogNoOpLogHandler() })
    private let input: Int32
    private let output: Int32
    private let stream: AsyncThrowingStream<Data, Swift.Error>
    private let continuation: AsyncThrowingStream<Data, Swift.Error>.Continuation
    private var started = false

    init(input: Int32 = 0, output: Int32 = 1) {
        self.input = input
        self.output = output
        (stream, continuation) = AsyncThrowingStream.makeStream()
    }

    func connect() async throws {
        guard !started else { return }
        started = true
        let (fd, continuation) = (input, continuation)
        let reader = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: buffer[..<n])
                var start = 0
                while let nl = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    if nl > start { continuation.yield(Data(pending[start..<nl])) }
                    start = nl + 1
                }
                pending.removeFirst(start)
            }
            continuation.finish()
        }
        reader.name = "mcp-stdin"
        reader.start()
    }

    func disconnect() async {
        continuation.finish()
    }

    /// Writes the message and its newline whole (one message never mixes with another:
    /// the actor sends one at a time).
    func send(_ data: Data) async throws {
        var bytes = [UInt8](data)
        bytes.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(output, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw MCPError.transportError(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO))
            }
            offset += n
        }
    }

    nonisolated func receive() -> AsyncThrowingStream<Data, Swift.Error> { stream }
}
