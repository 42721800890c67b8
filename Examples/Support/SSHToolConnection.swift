// From the command line and the user's OpenSSH setup to a connection, as ssh makes it.
import ArgumentParser
import Foundation
import Logging
import SSHKit
import TerminalSupport

/// What a tool connects with: the settings ssh_config resolved for the destination
/// (for the parts a connection does not use by itself: environment, forwards) and
/// the connection's configuration.
public struct SSHToolConnection: Sendable {
    public let tool: String
    public let host: SSHHostConfig
    public let configuration: SSHConfiguration
    public let logger: Logger

    /// Reads `~/.ssh/config` and `/etc/ssh/ssh_config` (or `-F`) for `destination`,
    /// with `-o`, `-i`, `-J`, `-A`, `login` (`-l`) and `port` (`-p`) winning over the
    /// files, as ssh does. Unknown host keys are asked about on the terminal (or
    /// through `SSH_ASKPASS`) and recorded; with nobody to ask they are refused.
    /// - Throws: `ExitCode(255)` after printing the configuration error, as ssh
    ///   exits on a bad configuration.
    /// `asks: false` (a fleet of hosts) asks nobody anything: an unknown host key is
    /// refused and no password is prompted for, as under `BatchMode yes`.
    public init(tool: String, options: SSHToolOptions, destination: SSHDestination,
                login: String? = nil, port: Int? = nil, asks: Bool = true) throws
    {
        self.tool = tool
        let logger = options.logger(tool: tool)
        self.logger = logger
        let ask = asks && TerminalPrompt.canAsk
        let quiet = options.quiet
        let confirm: @Sendable (SSHHostKeyPrompt) async -> Bool = { await Self.confirmUnknownHostKey($0, quiet: quiet) }
        let answer: @Sendable (SSHKeyboardInteractiveChallenge) async throws -> [String] = {
            try await Self.answerKeyboardInteractive($0)
        }
        let password: @Sendable (SSHPasswordRequest) async throws -> String? = { await Self.askPassword($0) }
        let passphrase: @Sendable (SSHPassphraseRequest) async throws -> String? = {
            await TerminalPrompt.ask($0.prompt, echo: false)
        }
        let interaction = SSHConfigInteraction(
            confirmUnknownHostKey: ask ? confirm : nil,
            keyboardInteractive: ask ? answer : nil,
            password: ask ? password : nil,
            passphrase: ask ? passphrase : nil,
            // the user's own configuration says so: do what ssh does with it
            allowsInsecureHostKeyChecking: true,
            logger: logger,
            libsshVerbosity: options.verbosity >= 3 ? 3 : options.verbosity == 2 ? 2 : 0)
        for warning in options.identityWarnings { FileHandle.standardError.write(Data(warning.utf8)) }
        let files = OpenSSHConfig(configFile: options.configFile, options: options.configOptions,
                                  allowsMatchExec: true)
        do throws(SSHConfigError) {
            (host, configuration) = try files.resolveConnection(
                for: destination.host, user: login ?? destination.user, port: port ?? destination.port,
                interaction: interaction)
        } catch {
            FileHandle.standardError.write(Data("\(tool): \(error)\n".utf8))
            throw ExitCode(255)
        }
        for warning in host.warnings { logger.debug("\(warning)") }
        // ssh's warning for a key others may read (the key is skipped, as ssh skips it)
        for file in host.identityFiles {
            if let warning = Self.unprotectedKeyWarning(file) { FileHandle.standardError.write(Data(warning.utf8)) }
        }
        logger.debug("resolved", metadata: [
            "host": "\(configuration.host)", "port": "\(configuration.port)", "user": "\(configuration.user)",
            "jumpHosts": "\(configuration.jumpHosts.map { "\($0.user)@\($0.host):\($0.port)" })",
        ])
    }

    /// The environment ssh would send (`SetEnv`, and `SendEnv` from ours), in channel
    /// options that leave a refused variable unset, as ssh does.
    public var channelOptions: SSHChannelOptions {
        var options = SSHChannelOptions(environment: host.sessionEnvironment(local: ProcessInfo.processInfo.environment))
        options.exportsRefusedEnvironment = false
        return options
    }

    /// Prints what went wrong as ssh would and returns its exit status, 255.
    public func failure(_ error: any Error) -> ExitCode {
        Self.report(error, tool: tool)
        return ExitCode(255)
    }

    public static func report(_ error: any Error, tool: String) {
        var text = "\(tool): \(error)\n"
        if let e = error as? SSHError, e.code == .hostKeyRejected {
            text += "Host key verification failed.\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// OpenSSH's check (sshkey_perm_ok): a private key file owned by this user that its
    /// group or others may access is refused. Returns ssh's warning for such a file.
    public static func unprotectedKeyWarning(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_uid == getuid(), st.st_mode & 0o077 != 0 else { return nil }
        let mode = String(UInt32(st.st_mode) & 0o777, radix: 8)
        return """
            @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
            @         WARNING: UNPROTECTED PRIVATE KEY FILE!          @
            @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
            Permissions 0\(mode) for '\(path)' are too open.
            It is required that your private key files are NOT accessible by others.
            This private key will be ignored.

            """
    }

    // MARK: questions ssh asks

    /// ssh's "The authenticity of host … can't be established" question: yes, no or
    /// the fingerprint itself; a yes is recorded by the library.
    static func confirmUnknownHostKey(_ prompt: SSHHostKeyPrompt, quiet: Bool) async -> Bool {
        let name = prompt.port == 22 ? prompt.hostName : "[\(prompt.hostName)]:\(prompt.port)"
        let kind = keyKind(prompt.key.type)
        let fingerprint = prompt.key.sha256Fingerprint
        TerminalPrompt.show("The authenticity of host '\(name)' can't be established.\n"
                            + "\(kind) key fingerprint is \(fingerprint).\n")
        var question = "Are you sure you want to continue connecting (yes/no/[fingerprint])? "
        while true {
            guard let answer = await TerminalPrompt.ask(question, echo: true) else { return false }
            let word = answer.trimmingCharacters(in: .whitespaces)
            if word.lowercased() == "yes" || word == fingerprint {
                if !quiet {
                    TerminalPrompt.show("Warning: Permanently added '\(name)' (\(kind)) to the list of known hosts.\n")
                }
                return true
            }
            if word.lowercased() == "no" { return false }
            question = "Please type 'yes', 'no' or the fingerprint: "
        }
    }

    /// ED25519, ECDSA, RSA, as ssh names key types in its questions.
    static func keyKind(_ type: String) -> String {
        if type.contains("ed25519") { return "ED25519" }
        if type.hasPrefix("ecdsa") || type.contains("ecdsa") { return "ECDSA" }
        if type.contains("rsa") { return "RSA" }
        if type.contains("dss") { return "DSA" }
        return type.uppercased()
    }

    static func askPassword(_ request: SSHPasswordRequest) async -> String? {
        if request.attempt > 1 { TerminalPrompt.show("Permission denied, please try again.\n") }
        return await TerminalPrompt.ask(request.prompt, echo: false)
    }

    struct PromptAbandoned: Error, CustomStringConvertible {
        var description: String { "no answer at the keyboard-interactive prompt" }
    }

    static func answerKeyboardInteractive(_ challenge: SSHKeyboardInteractiveChallenge) async throws -> [String] {
        if !challenge.name.isEmpty { TerminalPrompt.show(challenge.name + "\n") }
        if !challenge.instruction.isEmpty { TerminalPrompt.show(challenge.instruction + "\n") }
        var answers: [String] = []
        for prompt in challenge.prompts {
            guard let answer = await TerminalPrompt.ask(prompt.text, echo: prompt.echo) else { throw PromptAbandoned() }
            answers.append(answer)
        }
        return answers
    }
}
