import Foundation

/// Each vendor's way of taking the engine's status hooks, as it documents it: the file a
/// session's hooks are written to (if any) and how the agent is told of them. The command a
/// hook runs is the host's (`AgentHost.hookCommand`), given to each adapter.
extension AgentProvider.StatusHooks {
    /// The file the adapter writes on the host for the session `ptyID` before it starts
    /// (nil: none).
    func file(for ptyID: AgentPTYID, command: (AgentHookEvent) -> String) -> (name: String, text: String)? {
        switch self {
        case .none, .codexNotify: nil
        case .claudeSettings: ("\(ptyID).json", Self.claudeSettings(ptyID, command))
        case .geminiSystemDefaults: ("\(ptyID).gemini.json", Self.geminiSettings(ptyID, command))
        case .qwenSystemDefaults: ("\(ptyID).qwen.json", Self.qwenSettings(ptyID, command))
        case .openCodePlugin: (Self.openCodePluginName(ptyID), Self.openCodePlugin(ptyID, command))
        }
    }

    /// Every file any adapter may have written for `ptyID`, relative to the agents'
    /// directory (`hooks/NAME`): what deleting its task removes.
    static func files(of ptyID: AgentPTYID) -> [String] {
        [Self.claudeSettings, .geminiSystemDefaults, .qwenSystemDefaults, .openCodePlugin]
            .compactMap { $0.file(for: ptyID, command: { _ in "" })?.name }.map { "hooks/" + $0 }
    }

    /// The arguments and variables that hand the hooks to the agent, `filePath` where its
    /// `file` was written.
    func handOver(_ ptyID: AgentPTYID, filePath path: String?, command: (AgentHookEvent) -> String)
        -> (arguments: [String], environment: [String: String])
    {
        switch (self, path) {
        case (.codexNotify, _): return (["-c", Self.codexNotify(ptyID, command)], [:])
        case (.claudeSettings, let path?): return (["--settings", path], [:])
        case (.geminiSystemDefaults, let path?): return ([], ["GEMINI_CLI_SYSTEM_DEFAULTS_PATH": path])
        case (.qwenSystemDefaults, let path?): return ([], ["QWEN_CODE_SYSTEM_DEFAULTS_PATH": path])
        case (.openCodePlugin, let path?):
            let url = "file://" + path.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String($0) }.joined(separator: "/")
            let config = ["$schema": "https://opencode.ai/config.json", "plugin": [url]] as [String: Any]
            let data = (try? JSONSerialization.data(withJSONObject: config, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return ([], ["OPENCODE_CONFIG_CONTENT": String(decoding: data, as: UTF8.self)])
        default: return ([], [:])
        }
    }

    /// Claude Code's hooks for `ptyID` (each running `hookCommand` of its event), as a settings document for `--settings`.
    static func claudeSettings(_ ptyID: AgentPTYID, _ hookCommand: (AgentHookEvent) -> String) -> String {
        func hooks(_ e: AgentHookEvent, matcher: String? = nil) -> [String: Any] {
            var group: [String: Any] = ["hooks": [["type": "command", "command": hookCommand(e)]]]
            if let matcher { group["matcher"] = matcher }
            return group
        }
        let doc: [String: Any] = ["hooks": [
            "SessionStart": [hooks(.start)],
            "UserPromptSubmit": [hooks(.prompt)],
            "PreToolUse": [hooks(.tool, matcher: "*")],
            "Notification": [hooks(.notification)],
            "Stop": [hooks(.stop)],
        ]]
        let data = (try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Codex's `notify` program for `ptyID`, as a `-c` override (TOML): Codex runs it with
    /// a JSON argument at the end of each turn.
    static func codexNotify(_ ptyID: AgentPTYID, _ hookCommand: (AgentHookEvent) -> String) -> String {
        func toml(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return "notify=[\(toml("sh")), \(toml("-c")), \(toml(hookCommand(.stop))), \(toml("sh"))]"
    }

    /// Gemini CLI's hooks for `ptyID`, as a settings file for `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`:
    /// `SessionStart`, `BeforeAgent` (a prompt), `BeforeTool`, `Notification` (an approval
    /// it waits for), `AfterAgent` (the turn's end). Gemini has no event for a failed or
    /// cancelled turn; its screen's idle rule ends those.
    static func geminiSettings(_ ptyID: AgentPTYID, _ hookCommand: (AgentHookEvent) -> String) -> String {
        commandHookSettings(hookCommand, [
            ("SessionStart", .start), ("BeforeAgent", .prompt), ("BeforeTool", .tool),
            ("Notification", .notification), ("AfterAgent", .stop),
        ])
    }

    /// Qwen Code's hooks for `ptyID`, as a settings file for `QWEN_CODE_SYSTEM_DEFAULTS_PATH`
    /// (Claude's event names; `PreToolUse` runs once a tool is allowed, `PermissionRequest`
    /// before its dialog, `StopFailure` for a turn an API error ended).
    static func qwenSettings(_ ptyID: AgentPTYID, _ hookCommand: (AgentHookEvent) -> String) -> String {
        commandHookSettings(hookCommand, [
            ("SessionStart", .start), ("UserPromptSubmit", .prompt), ("PreToolUse", .tool),
            ("PermissionRequest", .approval), ("Notification", .notification), ("Stop", .stop),
            ("StopFailure", .failure),
        ])
    }

    /// `{"hooks": {Event: [{"hooks": [command]}]}}` with a named command per event (the
    /// name keeps it apart from a user's hook of the same command) and a 5 s timeout.
    private static func commandHookSettings(_ hookCommand: (AgentHookEvent) -> String, _ events: [(String, AgentHookEvent)]) -> String {
        var hooks: [String: Any] = [:]
        for (name, event) in events {
            hooks[name] = [["hooks": [[
                "type": "command", "name": "sshkit-agents-status-\(event.rawValue)",
                "command": hookCommand(event), "timeout": 5000,
            ] as [String: Any]]]]
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["hooks": hooks], options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The file name of OpenCode's plugin for `ptyID`: OpenCode tells plugins apart by
    /// their file's name, so it is the engine's own.
    static func openCodePluginName(_ ptyID: AgentPTYID) -> String { "sshkit-agents-status-\(ptyID).js" }

    /// OpenCode's plugin for `ptyID`: one exported function, as OpenCode loads plugins,
    /// whose hooks run the hook command (with `node:child_process`, which Bun and Node
    /// both have) for a new message (`chat.message`), a tool (`tool.execute.before`) and
    /// the events `session.idle` or an idle `session.status` (the turn's end),
    /// `permission.asked` (`permission.updated` before OpenCode 1.1), `question.asked`,
    /// their replies, and `session.error`. Events of sub-agents' sessions (those with a
    /// parent) are left out, so a sub-agent's end is never taken for the session's.
    static func openCodePlugin(_ ptyID: AgentPTYID, _ hookCommand: (AgentHookEvent) -> String) -> String {
        func js(_ s: String) -> String {
            let data = (try? JSONSerialization.data(withJSONObject: [s], options: [])) ?? Data("[\"\"]".utf8)
            return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
        }
        let commands = AgentHookEvent.allCases.map { "    \(js($0.rawValue)): \(js(hookCommand($0))),\n" }.joined()
        return """
            // agent-sessions: the status hooks of \(ptyID), written by the engine when it started the agent
            import { spawn } from "node:child_process";

            const commands = {
            \(commands)};
            const children = new Set();

            function fire(event) {
                try {
                    spawn("/bin/sh", ["-c", commands[event]], { stdio: "ignore" }).on("error", () => {});
                } catch {}
            }

            export const SSHKitAgentsStatus = async () => ({
                event: async ({ event }) => {
                    const p = (event && event.properties) || {};
                    if (event.type === "session.created" && p.info && p.info.parentID) children.add(p.info.id);
                    const session = p.sessionID || (p.info && p.info.sessionID);
                    if (session && children.has(session)) return;
                    switch (event.type) {
                    case "session.idle": fire("stop"); break;
                    case "session.status": if (p.status && p.status.type === "idle") fire("stop"); break;
                    case "permission.asked": case "permission.updated": case "permission.v2.asked": fire("approval"); break;
                    case "question.asked": case "question.v2.asked": fire("notification"); break;
                    case "permission.replied": case "question.replied": case "question.rejected": fire("answered"); break;
                    case "session.error": fire("failure"); break;
                    }
                },
                "chat.message": async (input) => { if (!children.has(input && input.sessionID)) fire("prompt"); },
                "tool.execute.before": async (input) => { if (!children.has(input && input.sessionID)) fire("tool"); },
            });

            """
    }
}
