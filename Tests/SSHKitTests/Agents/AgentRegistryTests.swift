import Foundation
@testable import AgentSessions
import Testing

/// The provider registry and the names the engine gives things: pure functions, checked
/// against the formats Emdash uses (so its users' trees stay compatible).
@Suite("Agent registry and names", .tags(.pure))
struct AgentRegistryTests {
    /// Every provider's fresh start with auto-approve and a one-line prompt "fix it":
    /// resume args, default args, auto-approve flag, extra args (none), prompt.
    static let freshCommandLines: [String: [String]] = [
        "codex": ["codex", "--full-auto", "fix it"],
        "claude": ["claude", "--dangerously-skip-permissions", "fix it"],
        "cursor": ["cursor-agent", "-f", "fix it"],
        "gemini": ["gemini", "--yolo", "-i", "fix it"],
        "qwen": ["qwen", "--yolo", "-i", "fix it"],
        "droid": ["droid", "fix it"],
        "amp": ["amp", "--dangerously-allow-all"],
        "opencode": ["opencode"],
        "copilot": ["copilot", "--allow-all-tools"],
        "charm": ["crush", "--yolo"],
        "auggie": ["auggie", "--allow-indexing", "fix it"],
        "goose": ["goose", "run", "-s", "-t", "fix it"],
        "kimi": ["kimi", "--yolo"],
        "kilocode": ["kilocode", "--auto", "fix it"],
        "kiro": ["kiro-cli", "chat", "fix it"],
        "rovo": ["acli", "rovodev", "run", "--yolo"],
        "cline": ["cline", "--yolo", "fix it"],
        "continue": ["cn", "fix it"],
        "codebuff": ["codebuff", "fix it"],
        "mistral": ["vibe", "--auto-approve", "fix it"],
        "pi": ["pi", "fix it"],
        "hermes": ["hermes", "--yolo"],
    ]

    /// The generic resume of every provider that has one, without auto-approve.
    static let resumeCommandLines: [String: [String]] = [
        "codex": ["codex", "resume", "--last"],
        "claude": ["claude", "-c", "-r"],
        "gemini": ["gemini", "--resume"],
        "qwen": ["qwen", "--continue"],
        "droid": ["droid", "-r"],
        "kilocode": ["kilocode", "--continue"],
        "continue": ["cn", "--resume"],
        "pi": ["pi", "-c"],
        "mistral": ["vibe", "--continue"],
        "goose": ["goose", "run", "-s"],
    ]

    @Test func theRegistryHasTheTwentyOneAgentsAndHermes() throws {
        #expect(AgentProvider.all.count == 22)
        #expect(Set(AgentProvider.all.map(\.id)).count == 22)
        #expect(Set(AgentProvider.all.map(\.id)) == Set(Self.freshCommandLines.keys))
        // editor launchers are never taken for agents
        #expect(!AgentProvider.all.contains { $0.binary == "cursor" || $0.binary == "kiro" })
        for p in AgentProvider.all {
            #expect(!p.installHint.isEmpty, "\(p.id) has no install hint")
            #expect(!p.versionArguments.isEmpty, "\(p.id) has no version arguments")
        }
        #expect(try AgentProvider.named("cline").versionArguments == ["help"])
        // what the user is told to run is what `agents install` runs (they drifted apart
        // when they were kept in two places)
        for p in AgentProvider.all {
            if let command = p.installCommand {
                #expect(p.installHint == command || p.installHint.hasPrefix(command + " ("), "\(p.id): \(p.installHint)")
            } else {
                #expect(p.installNote?.isEmpty == false, "\(p.id) has neither an install command nor a note")
            }
        }
        #expect(try AgentProvider.named("goose").installHint.contains("CONFIGURE=false"))
        #expect(AgentProvider.all.filter { $0.installCommand == nil }.map(\.id) == ["rovo"])
        // checked against the installed CLIs (RealAgentTests)
        #expect(try AgentProvider.named("mistral").versionArguments == ["--version"])
        #expect(try AgentProvider.named("hermes").versionArguments == ["--version"])
    }

    /// How each provider keeps its sessions, which is what a resume is dispatched on: the
    /// agents with an exact resume, and no "newest session" flag for Hermes (its
    /// `--continue` takes the user's newest session in any directory).
    @Test func theAgentsWithAnExactResumeSayHow() throws {
        #expect(try AgentProvider.named("claude").sessionTracking == .claudeSessionID)
        #expect(try AgentProvider.named("codex").sessionTracking == .codexThread)
        #expect(try AgentProvider.named("kimi").sessionTracking == .chosenSessionID(flag: "--session", store: .kimi))
        #expect(try AgentProvider.named("mistral").sessionTracking == .recordedSession(flag: "--resume", store: .vibe))
        #expect(try AgentProvider.named("hermes").sessionTracking == .recordedSession(flag: "--resume", store: .hermes))
        #expect(try AgentProvider.named("hermes").resumeArguments.isEmpty)
        #expect(try AgentProvider.named("kimi").promptDelivery == .typed, "kimi -c is a one-shot run")
        #expect(try AgentProvider.named("kimi").installHint.contains("kimi-cli==1.51.0"))
        #expect(try AgentProvider.named("kimi").refusedBinary?.markers.contains("no longer maintained") == true)
        let exact = AgentProvider.all.filter { $0.sessionTracking != .none }.map(\.id).sorted()
        #expect(exact == ["claude", "codex", "hermes", "kimi", "mistral"])
    }

    @Test(arguments: AgentProvider.all.map(\.id))
    func freshCommandLine(_ id: String) throws {
        let launch = try AgentLaunch.plan(try AgentProvider.named(id), name: "\(id)-main-t1", prompt: "fix it",
                                          autoApprove: true, resume: .fresh)
        #expect(launch.arguments == Self.freshCommandLines[id], "\(id)")
        let typed = try AgentProvider.named(id).promptDelivery == .typed
        #expect((launch.typedInput != nil) == typed, "\(id)")
        if typed { #expect(launch.typedInput == Array("fix it\r".utf8)) }
    }

    @Test(arguments: AgentProvider.all.map(\.id))
    func genericResumeCommandLine(_ id: String) throws {
        let launch = try AgentLaunch.plan(try AgentProvider.named(id), name: "x", prompt: nil, autoApprove: false,
                                          resume: .generic)
        let p = try AgentProvider.named(id)
        #expect(launch.arguments == (Self.resumeCommandLines[id] ?? [p.binary] + p.defaultArguments), "\(id)")
    }

    @Test func theOrderIsResumeDefaultsAutoApproveExtrasPrompt() throws {
        let settings = AgentProviderSettings(extraArguments: ["--model", "o3"])
        let codex = try AgentLaunch.plan(try AgentProvider.named("codex"), settings: settings, name: "x", prompt: "go",
                                         autoApprove: true, resume: .exact(["resume", "0199-thread"]))
        #expect(codex.arguments == ["codex", "resume", "0199-thread", "--full-auto", "--model", "o3", "go"])
        let goose = try AgentLaunch.plan(try AgentProvider.named("goose"), settings: settings, name: "x", prompt: "go",
                                         autoApprove: true, resume: .fresh)
        #expect(goose.arguments == ["goose", "run", "-s", "--model", "o3", "-t", "go"])
    }

    @Test func settingsOverrideEveryFlag() throws {
        let settings = AgentProviderSettings(binary: "/opt/bin/claude-wrapper", defaultArguments: ["--verbose"],
                                             autoApproveFlag: "", promptDelivery: .flag("-p"), resumeArguments: ["--again"],
                                             extraArguments: ["--x"], environment: ["ANTHROPIC_BASE_URL": "http://127.0.0.1:9"])
        let launch = try AgentLaunch.plan(try AgentProvider.named("claude"), settings: settings, name: "x", prompt: "hi",
                                          autoApprove: true, resume: .generic)
        #expect(launch.arguments == ["/opt/bin/claude-wrapper", "--again", "--verbose", "--x", "-p", "hi"])
        #expect(launch.environment == ["ANTHROPIC_BASE_URL": "http://127.0.0.1:9"])
    }

    @Test(arguments: ["1ABC", "A-B", "", "A B", "PATH=x", "ÄBC", "A;rm"])
    func unsafeEnvironmentNamesAreTypedErrors(_ name: String) {
        let settings = AgentProviderSettings(environment: [name: "v"])
        let error = #expect(throws: AgentError.self) {
            _ = try AgentLaunch.plan(try AgentProvider.named("claude"), settings: settings, name: "x", prompt: nil,
                                     autoApprove: false, resume: .fresh)
        }
        #expect(error?.code == .invalidEnvironmentName, "\(String(describing: error))")
    }

    @Test func validEnvironmentNamesPass() throws {
        let settings = AgentProviderSettings(environment: ["_A1": "x", "OPENAI_API_KEY": "k y'z", "a": ""])
        try settings.validate()
    }

    @Test func aNulByteOrAnEmptyBinaryIsRefused() throws {
        for settings in [AgentProviderSettings(binary: ""), AgentProviderSettings(binary: "a b"),
                         AgentProviderSettings(extraArguments: ["a\u{0}b"])] {
            #expect(throws: AgentError.self) { try settings.validate() }
        }
        #expect(throws: AgentError.self) {
            _ = try AgentLaunch.plan(try AgentProvider.named("claude"), name: "x", prompt: "a\u{0}", autoApprove: false,
                                     resume: .fresh)
        }
    }

    @Test func aTypedPromptOfSeveralLinesGoesInBracketedPaste() throws {
        let launch = try AgentLaunch.plan(try AgentProvider.named("amp"), name: "x", prompt: "line one\nline two",
                                          autoApprove: false, resume: .fresh)
        #expect(launch.typedInput == Array("\u{1B}[200~line one\nline two\u{1B}[201~\r".utf8))
        #expect(launch.arguments == ["amp"])
    }

    @Test func aPromptOver16KiBGoesToAFileInTheWorktree() throws {
        let big = String(repeating: "x", count: 16 * 1024) + "!"
        let launch = try AgentLaunch.plan(try AgentProvider.named("claude"), name: "claude-main-t1", prompt: big,
                                          autoApprove: false, resume: .fresh)
        let file = try #require(launch.promptFile)
        #expect(file.relativePath == ".emdash/prompts/claude-main-t1.md")
        #expect(file.contents == big)
        #expect(launch.arguments.count == 2)
        #expect(launch.arguments[1].contains(file.relativePath))
        #expect(launch.arguments[1].utf8.count < 300)
        // exactly 16 KiB stays inline
        let edge = try AgentLaunch.plan(try AgentProvider.named("claude"), name: "x", prompt: String(big.dropLast()),
                                        autoApprove: false, resume: .fresh)
        #expect(edge.promptFile == nil)
    }

    @Test func slugs() {
        #expect(AgentNaming.slug("Fix the flaky test") == "fix-the-flaky-test")
        #expect(AgentNaming.slug("  --Fix: the *flaky*   test!--  ") == "fix-the-flaky-test")
        #expect(AgentNaming.slug("Ünïcode über") == "n-code-ber")
        #expect(AgentNaming.slug("!!!") == "task")
        #expect(AgentNaming.slug("") == "task")
        #expect(AgentNaming.slug("v2.0 release") == "v2-0-release")
    }

    @Test func worktreeAndBranchNames() {
        let name = AgentNaming.worktreeName(title: "Fix the flaky test", unixMilliseconds: 1_732_400_000_123)
        #expect(name == "fix-the-flaky-test-1732400000123")
        #expect(AgentNaming.worktreePath(projectPath: "/srv/app/", name: name) == "/srv/app/.emdash/worktrees/\(name)")
        #expect(AgentNaming.branchName(name) == "emdash/fix-the-flaky-test-1732400000123")
    }

    @Test func ptyIDsParseLongestProviderFirst() throws {
        let id = AgentPTYID(providerID: "claude", kind: .main, suffix: "task-1")
        #expect(id.description == "claude-main-task-1")
        #expect(AgentPTYID(parsing: "claude-main-task-1") == id)
        #expect(AgentPTYID(parsing: "codex-chat-c9") == AgentPTYID(providerID: "codex", kind: .chat, suffix: "c9"))
        #expect(AgentPTYID(parsing: "continue-main-x")?.providerID == "continue")
        #expect(AgentPTYID(parsing: "kilocode-chat-main-1") == AgentPTYID(providerID: "kilocode", kind: .chat, suffix: "main-1"))
        #expect(AgentPTYID(parsing: "claude-main-") == nil)
        #expect(AgentPTYID(parsing: "nobody-main-1") == nil)
        #expect(AgentPTYID(parsing: "claude-other-1") == nil)
    }

    @Test func sessionUUIDsAreSHA256WithVersionAndVariantBits() {
        // computed with Python's hashlib: sha256(id)[:16], byte 6 = (b & 0x0f) | 0x40, byte 8 = (b & 0x3f) | 0x80
        #expect(AgentNaming.sessionUUID(for: "task-123") == "ba5745f2-c157-4ebc-94cb-43e2e76cd3d9")
        #expect(AgentNaming.sessionUUID(for: "abc") == "ba7816bf-8f01-4fea-8141-40de5dae2223")
        #expect(AgentNaming.sessionUUID(for: "") == "e3b0c442-98fc-4c14-9afb-f4c8996fb924")
        // the suffix, not the whole PTY id
        #expect(AgentPTYID(providerID: "claude", kind: .chat, suffix: "abc").sessionUUID == AgentNaming.sessionUUID(for: "abc"))
        let long = String(repeating: "a", count: 1000)
        #expect(AgentNaming.sessionUUID(for: long).hasPrefix("41edece4-2d63-48d9-bf51"))
    }

    @Test func claudeEncodesEveryNonAlphanumericCharacter() {
        #expect(AgentNaming.claudeProjectDirectory(forWorkingDirectory: "/srv/app/.emdash/worktrees/fix-1_2")
            == "-srv-app--emdash-worktrees-fix-1-2")
    }

    @Test func shellsOutsideTheAllowlistAreRefused() throws {
        for ok in ["/bin/bash", "/bin/sh", "/usr/bin/zsh", "/usr/local/bin/fish"] { try AgentShells.check(ok) }
        for bad in ["/bin/tcsh", "/usr/bin/dash", "/tmp/bash", "bash", "", "/usr/bin/nu"] {
            #expect(throws: AgentError.self) { try AgentShells.check(bad) }
        }
    }
}

/// What `agents install` runs and what `hosts doctor` looks for, per provider; and how
/// the check-up reads a host's answers.
@Suite("Agent installers and host check-up", .tags(.pure))
struct AgentInstallTests {
    @Test func everyAgentButRovoHasAnInstallCommandForItsUserAndScriptsPipedIntoAShellAreKnown() {
        for p in AgentProvider.all {
            guard let command = p.installCommand else {
                #expect(p.id == "rovo", "\(p.id) has no install command")
                continue
            }
            #expect(!command.contains("sudo"), "\(p.id): no root")
            if command.hasPrefix("npm ") { #expect(command.contains("--prefix \"$HOME/.local\""), "\(p.id)") }
            let piped = AgentProvider.pipesDownloadIntoShell(command)
            #expect(piped == (command.hasPrefix("curl ")), "\(p.id): \(command)")
        }
        #expect(AgentProvider.pipesDownloadIntoShell("wget -qO- https://x | sudo bash"))
        #expect(AgentProvider.pipesDownloadIntoShell("curl -fsSL x|sh"))
        #expect(AgentProvider.pipesDownloadIntoShell("curl x | env A=1 /usr/bin/zsh -s"))
        #expect(!AgentProvider.pipesDownloadIntoShell("npm install -g x | shasum"))
        #expect(!AgentProvider.pipesDownloadIntoShell("uv tool install kimi-cli==1.51.0"))
    }

    @Test func credentialFilesAreUnderTheHomeAndVariablesAreNames() {
        for p in AgentProvider.all {
            for f in p.credentials.files { #expect(!f.hasPrefix("/") && !f.hasPrefix("~") && !f.contains(".."), "\(p.id): \(f)") }
            for v in p.credentials.variables {
                #expect(v.range(of: #"^[A-Z_][A-Z0-9_]*$"#, options: .regularExpression) != nil, "\(p.id): \(v)")
            }
        }
        #expect(AgentProvider.all.filter { !$0.credentials.isKnown }.map(\.id) == ["rovo"])
    }

    @Test func theCheckupReadsVersionsShellsDiskAndClockIntoLevels() throws {
        let providers = [try AgentProvider.named("codex"), try AgentProvider.named("amp")]
        let now = Date()
        func run(_ lines: [String], skew: Double = 0) -> [String: AgentHostCheckup.Finding] {
            let out = (["now\t\(now.timeIntervalSince1970 + skew)"] + lines).joined(separator: "\n")
            let c = AgentHostCheckup.evaluate(out, providers: providers, directories: ["~/", "/srv/app"], sent: now, received: now)
            return Dictionary(c.findings.map { ($0.subject, $0) }, uniquingKeysWith: { a, _ in a })
        }
        let good = run(["shell\t/bin/bash", "tmux\ttmux 3.3a", "git\tgit version 2.39.5", "loginrc\t0", "loginpath\t/usr/bin:/bin",
                        "agent\tcodex\t/h/.local/bin/codex", "file\t.codex/auth.json", "agent\tamp\t/h/bin/amp", "var\tAMP_API_KEY",
                        "disk\t~/\t99999999", "disk\t/srv/app\t99999999"])
        #expect(good.values.allSatisfy { $0.level == .ok }, "\(good.values.filter { $0.level != .ok })")
        #expect(good["agent codex"]?.detail.contains("~/.codex/auth.json") == true)
        #expect(good["agent amp"]?.detail.contains("AMP_API_KEY") == true)
        let bad = run(["shell\t/usr/bin/tcsh", "tmux\ttmux 2.6", "git\tgit version 2.11.0", "loginrc\t124", "loginpath\t",
                       "agent\tcodex\t/h/codex", "disk\t~/\t100", "disk\t/srv/app\t1500000"], skew: 120)
        #expect(bad["tmux"]?.level == .warning && bad["git"]?.level == .problem && bad["login shell"]?.level == .problem)
        #expect(bad["login PATH"]?.level == .warning && bad["agent codex"]?.level == .warning)
        #expect(bad["disk ~/"]?.level == .problem && bad["disk /srv/app"]?.level == .warning)
        #expect(bad["clock"]?.level == .problem && bad["clock"]?.fix != nil)
        #expect(bad.values.filter { $0.level != .ok }.allSatisfy { $0.fix != nil || $0.subject == "disk ~/" || $0.level == .warning })
        let none = run(["shell\t/bin/sh", "loginrc\t0", "loginpath\t/bin"], skew: 8)
        #expect(none["tmux"]?.level == .problem && none["git"]?.level == .problem)
        #expect(none["agents"]?.level == .warning && none["clock"]?.level == .warning)
    }
}
