import Foundation

/// Small scripts that behave like agent CLIs in the ways the engine depends on,
/// installed in a directory every test user can read (the "host" is this machine).
enum FakeAgents {
    static let scripts: [String: String] = [
        // a TUI that prints how it was started, then answers each line it reads
        "fake-tui": #"""
            #!/bin/sh
            printf 'ARGS:'; for a in "$@"; do printf ' [%s]' "$a"; done; printf '\n'
            printf 'ENV FOO=[%s]\n' "${FOO:-}"
            printf 'CWD %s\n' "$(pwd)"
            esc=$(printf '\033')
            while :; do
                printf 'READY> '
                IFS= read -r line || exit 0
                case "$line" in *"$esc[200~"*) echo "PASTE-START" ;; esac
                case "$line" in *"$esc[201~"*) echo "PASTE-END" ;; esac
                case "$line" in
                    quit) echo bye; exit 0 ;;
                    exit\ *) exit "${line#exit }" ;;
                esac
                echo "got: $line"
            done
            """#,
        // prints a numbered line every 100 ms, forever
        "fake-ticker": #"""
            #!/bin/sh
            i=0
            while :; do i=$((i + 1)); echo "tick $i"; sleep 0.1; done
            """#,
        // ends at once with status 7
        "fake-exit": #"""
            #!/bin/sh
            echo "exiting with 7"
            exit 7
            """#,
    ]

    /// The directory with every fake (made once per test process).
    static let directory: String = {
        let dir = "/tmp/sshkit-fake-agents-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        for (name, text) in scripts {
            let path = dir + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data((text + "\n").utf8),
                                           attributes: [.posixPermissions: 0o755])
        }
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        return dir
    }()

    /// A directory with executables named as given (each prints its name and exits),
    /// for detection tests.
    static func binaries(_ names: [String]) -> String {
        let dir = "/tmp/sshkit-fake-bins-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        for name in names {
            FileManager.default.createFile(atPath: dir + "/" + name, contents: Data("#!/bin/sh\necho \(name)\n".utf8),
                                           attributes: [.posixPermissions: 0o755])
        }
        ServerRegistry.dirs.withLock { _ = $0.insert(dir) }
        return dir
    }
}
