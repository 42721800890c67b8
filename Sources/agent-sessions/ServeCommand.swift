import AgentServe
import AgentSessions
import ArgumentParser
import Foundation

/// `agent-sessions serve`: the board and each agent's terminal as pages for a phone or a
/// browser, from this machine, over the connections it holds to the hosts; `serve pair`
/// lets a device in, `serve devices` lists and revokes them.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the board and the agents' terminals to paired phones and browsers (http://127.0.0.1:7420).",
        subcommands: [Run.self, Pair.self, Devices.self], defaultSubcommand: Run.self)

    /// The serve directory beside the store.
    static func state(_ global: GlobalOptions) throws -> ServeState {
        do {
            return try ServeState(directory: ServeState.directory(besideStore: Context.storePath(global)))
        } catch {
            throw Failure(.storage, error.message)
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Serve the pages (what `agent-sessions serve` alone does).",
            discussion: """
                Listens on 127.0.0.1:7420 unless --listen says otherwise. Only paired devices come in: run \
                `agent-sessions serve pair` and open the address it prints. Reach it from elsewhere through \
                `ssh -L 7420:127.0.0.1:7420 this-machine`, Tailscale Serve or a reverse proxy with TLS; listening \
                on anything but loopback needs --listen, and the page then needs TLS in front of it. Every \
                pairing and action is written to the audit log (serve/audit.jsonl beside the store).
                """)
        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("Where to listen, ADDRESS:PORT (port 0: any free port).", valueName: "address:port"))
        var listen: String?

        @Option(help: ArgumentHelp("xterm.js's lib directory (Debian's node-xterm).", valueName: "dir"))
        var xterm: String = "/usr/share/nodejs/xterm/lib"

        @Flag(help: "Mark the device cookie Secure (a TLS proxy is in front).")
        var secureCookie = false

        func run() async throws {
            var options = ServeServer.Options()
            options.xtermDirectory = xterm
            options.secureCookie = secureCookie
            if let listen {
                guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
                      (0...65535).contains(port)
                else {
                    throw ValidationError("--listen is ADDRESS:PORT, e.g. 127.0.0.1:7420")
                }
                options.host = String(listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
                options.port = port
            }
            let state = try ServeCommand.state(global)
            if !options.isLoopback {
                note("agent-sessions serve: listening on \(options.host), not loopback: put TLS in front of it "
                     + "(a reverse proxy, Tailscale Serve) and start with --secure-cookie; see the guide")
            }
            signal(SIGPIPE, SIG_IGN)
            try await Context.with(global) { context in
                let server = ServeServer(engine: context.orchestrator, state: state, options: options)
                let addressFile = state.directory + "/address"
                try await server.run { address in
                    try? address.write(toFile: addressFile, atomically: true, encoding: .utf8)
                    print("agent-sessions serve: listening on \(address) (pair a device: agent-sessions serve pair)")
                    fflush(nil)
                }
            }
        }
    }

    struct Pair: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pair",
            abstract: "Make a one-time code (valid 5 minutes) that pairs one phone or browser.",
            discussion: """
                Prints the code, the address to open with it, and a QR code of that address (with qrencode \
                installed). The code is used once; each device gets a token of its own in a cookie.
                """)
        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("The address the device opens (default: where serve listens).", valueName: "url"))
        var url: String?

        @Flag(help: "Print the code alone.")
        var quiet = false

        func run() async throws {
            try await running {
                let state = try ServeCommand.state(global)
                let code: String
                do throws(ServeError) { code = try state.newPairingCode() } catch { throw Failure(.storage, error.message) }
                if quiet {
                    print(code)
                    return
                }
                let base = url ?? (try? String(contentsOfFile: state.directory + "/address", encoding: .utf8))
                    ?? "http://127.0.0.1:7420"
                let link = base.trimmingCharacters(in: .whitespacesAndNewlines) + "/pair#code=" + code
                print("Pairing code: \(code) (valid 5 minutes, once)")
                print("Open: \(link)")
                if let qr = Self.qrCode(link) { print(qr, terminator: "") }
            }
        }

        /// The link as a QR code for the terminal (qrencode's UTF-8 blocks), nil without qrencode.
        static func qrCode(_ text: String) -> String? {
            let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
                .map { "\($0)/qrencode" }.first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let path else { return nil }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = ["-t", "UTF8", "-m", "1", text]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { return nil }
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return p.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil
        }
    }

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "devices",
            abstract: "List the paired devices; --revoke ID ends one (its open pages and sockets close at once).")
        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("The device to revoke (its id or the id's start).", valueName: "id"))
        var revoke: String?

        @Flag(help: "As JSON.")
        var json = false

        func run() async throws {
            try await running {
                let state = try ServeCommand.state(global)
                if let revoke {
                    do throws(ServeError) {
                        let d = try state.revoke(revoke)
                        state.audit(device: d.id, action: "revoke", target: d.name, outcome: "revoked")
                        print("revoked \(d.id) (\(d.name))")
                    } catch {
                        switch error.code {
                        case .notFound: throw Failure(.notFound, error.message)
                        case .invalidArgument: throw Failure.usage(error.message)
                        default: throw Failure(.storage, error.message)
                        }
                    }
                    return
                }
                let devices: [ServeDevice]
                do throws(ServeError) { devices = try state.devices() } catch { throw Failure(.storage, error.message) }
                if json {
                    struct Row: Encodable {
                        var id, name: String
                        var pairedAt: Date
                    }
                    let e = JSONEncoder()
                    e.dateEncodingStrategy = .iso8601
                    e.outputFormatting = [.prettyPrinted, .sortedKeys]
                    print(String(decoding: try e.encode(devices.map { Row(id: $0.id, name: $0.name, pairedAt: $0.pairedAt) }),
                                 as: UTF8.self))
                    return
                }
                if devices.isEmpty { print("no devices paired (agent-sessions serve pair)") }
                let f = ISO8601DateFormatter()
                for d in devices { print("\(d.id)  \(f.string(from: d.pairedAt))  \(d.name)") }
            }
        }
    }
}
