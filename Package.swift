// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "SSHKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SSHKit", targets: ["SSHKit"]),
        .library(name: "ServerTransport", targets: ["ServerTransport"]),
        .library(name: "AgentSessions", targets: ["AgentSessions"]),
        .library(name: "AgentSessionsSQLite", targets: ["AgentSessionsSQLite"]),
        .library(name: "AgentCockpit", targets: ["AgentCockpit"]),
        .library(name: "AgentServe", targets: ["AgentServe"]),
        .library(name: "TerminalSupport", targets: ["TerminalSupport"]),
        .executable(name: "ssh-exec", targets: ["ssh-exec"]),
        .executable(name: "known-hosts", targets: ["known-hosts"]),
        .executable(name: "ssh-shell", targets: ["ssh-shell"]),
        .executable(name: "ssh-sftp", targets: ["ssh-sftp"]),
        .executable(name: "ssh-forward", targets: ["ssh-forward"]),
        .executable(name: "ssh-fleet", targets: ["ssh-fleet"]),
        .executable(name: "agent-sessions", targets: ["agent-sessions"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // `agent-sessions mcp`: the Model Context Protocol's own Swift SDK
        .package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"),
        // `agent-sessions serve`: the page's HTTP and WebSocket server, and the hashes,
        // keys and encryption of its pairing and Web Push
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // the page's files gzipped once (zlib; already under hummingbird-websocket)
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        // `swift package generate-documentation`: the DocC catalogues of SSHKit and
        // ServerTransport (a command plugin; nothing links it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // libssh as the system provides it (Debian: libssh-dev). Only SSHCore depends on it.
        .systemLibrary(
            name: "CLibSSH",
            pkgConfig: "libssh",
            providers: [.apt(["libssh-dev"])]
        ),
        // The C core: the only code that calls libssh. One worker thread per connection.
        .target(
            name: "SSHCore",
            dependencies: ["CLibSSH"],
            cSettings: [
                .define("_GNU_SOURCE"),
            ],
            linkerSettings: [.linkedLibrary("ssh"), .linkedLibrary("crypto"), .linkedLibrary("pthread")]
        ),
        // The Swift API. Only Sources/SSHKit/Internal imports SSHCore.
        .target(
            name: "SSHKit",
            dependencies: [
                "SSHCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What `--version` prints: the release and the commit the tools were built from.
        .target(
            name: "CBuildInfo"
        ),
        // pipe2 and mkostemp for ServerTransport (GNU calls Swift's Glibc does not declare).
        .target(
            name: "CTransportSupport"
        ),
        // One protocol for files and processes on this machine or a server.
        .target(
            name: "ServerTransport",
            dependencies: ["SSHKit", "CTransportSupport"]
        ),
        // Coding agents in remote git worktrees inside remote tmux sessions.
        .target(
            name: "AgentSessions",
            dependencies: ["ServerTransport", "SSHKit", "TerminalSupport"]
        ),
        // The agent-sessions store in SQLite: records and the session map.
        .target(
            name: "AgentSessionsSQLite",
            dependencies: ["AgentSessions", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        // An example service on ServerTransport (Docs/Guide-Transports.md, "Adding a service").
        .target(
            name: "AgentSettingsExample",
            dependencies: ["ServerTransport"],
            path: "Examples/transport-service"
        ),
        // the local terminal of the interactive tools (raw mode, size, keystrokes)
        .target(
            name: "TerminalSupport",
            dependencies: ["SSHKit"]
        ),
        // the agent-sessions cockpit: the board, a live preview and keys, drawn with TerminalSupport
        .target(
            name: "AgentCockpit",
            dependencies: ["AgentSessions", "SSHKit", "TerminalSupport"]
        ),
        // agent-sessions serve: the engine as pages for phones and browsers, over the same
        // connections (a front end: it reaches the engine through its door only)
        .target(
            name: "AgentServe",
            dependencies: [
                "AgentSessions", "SSHKit",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The fuzz targets of the reliability suite (part 6): a corpus replayer here, a
        // libFuzzer binary when scripts/fuzz.sh builds it with --sanitize=fuzzer.
        .executableTarget(
            name: "sshkit-fuzz",
            dependencies: ["SSHKit"],
            path: "Fuzz/Sources/sshkit-fuzz"
        ),
        // The agent-sessions command: the engine from a terminal, records in SQLite.
        .executableTarget(
            name: "agent-sessions",
            dependencies: [
                "AgentSessions", "AgentSessionsSQLite", "AgentCockpit", "AgentServe", "ServerTransport", "SSHKit", "TerminalSupport",
                "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "MCP", package: "swift-sdk"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // what the ssh-like examples share: options, destinations, prompts, the connection
        .target(
            name: "ExampleSupport",
            dependencies: [
                "SSHKit", "TerminalSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/Support"
        ),
        .executableTarget(
            name: "ssh-exec",
            dependencies: [
                "SSHKit", "ExampleSupport", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ssh-exec"
        ),
        .executableTarget(
            name: "ssh-sftp",
            dependencies: [
                "SSHKit", "ExampleSupport", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ssh-sftp"
        ),
        .executableTarget(
            name: "ssh-shell",
            dependencies: [
                "SSHKit", "ExampleSupport", "TerminalSupport", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ssh-shell"
        ),
        .executableTarget(
            name: "ssh-forward",
            dependencies: [
                "SSHKit", "ExampleSupport", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ssh-forward"
        ),
        .executableTarget(
            name: "ssh-fleet",
            dependencies: [
                "SSHKit", "ExampleSupport", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ssh-fleet"
        ),
        .executableTarget(
            name: "known-hosts",
            dependencies: [
                "SSHKit", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/known-hosts"
        ),
        // writes store records as fast as it can, for the store's crash test (not a product)
        .executableTarget(
            name: "agent-store-writer",
            dependencies: ["AgentSessions", "AgentSessionsSQLite"],
            path: "Tests/StoreWriter"
        ),
        .testTarget(
            name: "SSHKitTests",
            dependencies: ["SSHKit", "SSHCore", "ServerTransport", "AgentSessions", "AgentSessionsSQLite", "AgentSettingsExample",
                           "TerminalSupport", "AgentCockpit", "AgentServe"],
            path: "Tests/SSHKitTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
