// swift-tools-version: 6.0
// Benchmarks live in their own package so that library users never resolve or build them.
import PackageDescription

let package = Package(
    name: "SSHKitBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SSHKit", path: ".."),
    ],
    targets: [
        // The comparison baseline: a minimal libssh C client, the way a careful C
        // programmer would write it (blocking mode, NODELAY on). Not part of the library.
        .target(
            name: "LibSSHBaseline",
            linkerSettings: [.linkedLibrary("ssh")]
        ),
        // Run on the (local) server by the fairness benchmark: a stream of a fixed speed.
        .executableTarget(name: "stream-pacer"),
        .executableTarget(
            name: "sshkit-bench",
            dependencies: [
                .product(name: "SSHKit", package: "SSHKit"),
                .product(name: "ServerTransport", package: "SSHKit"),
                .product(name: "AgentSessions", package: "SSHKit"),
                .product(name: "AgentCockpit", package: "SSHKit"),
                .product(name: "TerminalSupport", package: "SSHKit"),
                "LibSSHBaseline",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
