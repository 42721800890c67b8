import Foundation
import SSHKit
import ServerTransport
import Synchronization
import TerminalSupport

/// Following a pane's screen as it changes.
extension AgentTmuxServer {
    /// Arguments: the socket, the pane, the spacing in seconds, the columns and rows to lay
    /// the agent out at while it is followed (both empty for none), and the session's name.
    /// Exit 3: no such session.
    ///
    /// On a terminal, with tmux 3.2 or later, it prints `sshkit-follow WxH` and runs a
    /// tmux client attached to the session, read-only and ignoring its own size, on a
    /// terminal of the window's size: tmux sends what changes on the screen the moment it
    /// changes, as to any client, and nothing while it stays. Such a client is a follower:
    /// the status watcher and this script count only the other clients as someone attached.
    ///
    /// Otherwise (on pipes, an older tmux) it looks itself: it prints `sshkit-screen N`,
    /// then the screen's N bytes and a newline, at once and after each change; asks every
    /// spacing while the screen changed in the last second, else every 200 ms; it ends when
    /// its input ends.
    ///
    /// With a size, and nobody attached to the session, the window is resized to it (the
    /// agent redraws for it, as for a smaller client) and its own size is kept in the
    /// window option `@sshkit-size`; at the end it is given back, unless a client is
    /// attached then, and the window's `window-size` is unset, so the next client that
    /// attaches sizes it again. Someone attached drives the size: the window is left as it
    /// is.
    static let followScript = #"""
        S=$1 P=$2 fast=$3 W=$4 H=$5 N=$6 prev= idle=0 first=1 orig= stored= people=0 old= me=
        export LC_ALL=C
        T() { tmux -L "$S" -f /dev/null "$@"; }
        # one command, so that a client attaching meanwhile is never resized under; this
        # follower's own client gone first (the server learns of its end a moment after it)
        give_back() {
            [ -n "$orig" ] || return 0
            trap '' TERM HUP INT PIPE
            n=0
            while [ -n "$me" ] && [ "$n" -lt 100 ] && T list-clients -F '#{client_name}' 2>/dev/null | grep -qxF "$me"; do
                sleep 0.01
                n=$((n + 1))
            done
            T if-shell -F -t "$P" '#{session_attached}' '' "resize-window -t '$P' -x ${orig%x*} -y ${orig#*x}" \; \
                set-option -w -u -t "$P" window-size \; set-option -w -u -t "$P" @sshkit-size >/dev/null 2>&1
            orig=
        }
        # the version, the window's size, the size kept by a preview, and a word per client:
        # c11 for a follower (read-only, its size ignored), another for a person
        info=$(T display-message -p -t "$P" '#{version} #{window_width}x#{window_height} #{@sshkit-size}' \; \
            list-clients -t "$P" -F 'c#{client_readonly}#{m:*ignore-size*,#{client_flags}}' 2>/dev/null) || exit 3
        set -- $info
        [ $# -ge 2 ] || exit 3
        case $1 in [0-2].*|3.[01]*) old=1 ;; esac
        win=$2
        shift 2
        for w; do
            case $w in c11) ;; c*) people=$((people + 1)) ;; *) stored=$w ;; esac
        done
        if [ -n "$W" ] && [ "$people" = 0 ]; then
            orig=${stored:-$win}
            trap give_back EXIT
            # a signal, or the channel gone under a write, ends it through give_back
            trap 'exit 0' TERM HUP INT PIPE
            T set-option -w -t "$P" @sshkit-size "$orig" \; resize-window -t "$P" -x "$W" -y "$H" >/dev/null 2>&1
            win=${W}x$H
        fi
        if [ -t 1 ]; then
            stty raw -echo 2>/dev/null
            if [ -z "$old" ]; then
                me=$(tty)
                stty cols "${win%x*}" rows "${win#*x}" 2>/dev/null
                printf 'sshkit-follow %s\n' "$win"
                T -u -T RGB attach-session -f ignore-size,read-only -t "=$N"
                exit 0
            fi
        fi
        exec 3<&0; { cat <&3 >/dev/null 2>&1; kill $$ 2>/dev/null; } & exec 3<&-
        while :; do
            cur=$(T capture-pane -p -e -J -S -0 -t "$P" 2>/dev/null) || exit 3
            if [ "$first" = 1 ] || [ "$cur" != "$prev" ]; then
                printf 'sshkit-screen %s\n%s\n' "${#cur}" "$cur" || exit 0
                prev=$cur idle=0 first=0
            else
                idle=$((idle + 1))
            fi
            if [ "$idle" -lt 25 ]; then sleep "$fast"; else sleep 0.2; fi
        done
        """#

    /// Gives the visible screen of the session `name` (with colours, as SGR sequences) once
    /// at the start and again each time it changed, until the session ends or the task is
    /// cancelled, at most one screen per `spacing` (the last one always comes).
    ///
    /// Over a transport that opens terminals, tmux itself tells what changed: a tmux
    /// client on the host, attached read-only and ignoring its size, sends the screen's
    /// changes the moment they happen, and the screen is kept here from them (a
    /// `VirtualTerminal`); nothing crosses the network while it stays as it is. Such a
    /// client does not count as someone attached (an agent whose turn ended while
    /// followed is still done). Over pipes, or with a tmux older than 3.2, a loop on the
    /// host looks at the screen every `spacing` while it changes and every 200 ms once it
    /// was still for a second, and sends only a changed one.
    ///
    /// With `size`, the agent is laid out at that size while it is followed (what a person
    /// attached at that size would see: a full-screen agent's answer, not the bottom of a
    /// taller window), and given back its own size after, unless someone is attached: then
    /// that person's terminal drives the size and the screen is followed as it is (the
    /// part of it that fits, should they resize the window while it is followed).
    /// - Throws: `sessionNotRunning` when the session is not there; `tmuxFailed` when the
    ///   client on the host could not draw (what it printed is the detail); `transport`;
    ///   `cancelled`.
    public func followScreen(of name: String, size: SSHTerminalSize? = nil, spacing: Duration = .milliseconds(40),
                             _ screen: @Sendable (String) async -> Void) async throws(AgentError)
    {
        let seconds = Double(spacing.components.seconds) + Double(spacing.components.attoseconds) / 1e18
        let arguments = ["-c", Self.followScript, "sh", socket, Self.pane(name), String(format: "%.3f", max(0.01, seconds)),
                         size.map { "\(max(2, $0.columns))" } ?? "", size.map { "\(max(2, $0.rows))" } ?? "", name]
        let output: ProcessOutput
        let hangUp: @Sendable () -> Void
        do {
            if let terminals = shell.transport as? any TerminalTransport {
                let t = try await terminals.startTerminal(
                    "/bin/sh", arguments: arguments, environment: [:],
                    terminal: SSHTerminal(term: "xterm-256color", size: size ?? SSHTerminalSize(columns: 80, rows: 24)))
                output = t.output
                hangUp = { t.cancel() }
            } else {
                let p = try await shell.transport.startProcess("/bin/sh", arguments: arguments, environment: [:])
                output = p.stdout
                hangUp = {
                    p.input.finish()
                    p.cancel()
                }
            }
        } catch {
            throw AgentError(error, while: "following the screen of \(name)")
        }
        let followed = FollowedScreen()
        let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let reader = Task {
            for await chunk in output where followed.take(chunk) { changed.yield() }
            changed.finish()
        }
        defer {
            hangUp()
            reader.cancel()
        }
        var last: String?
        var shownAt: ContinuousClock.Instant?
        for await _ in changes {
            if let shownAt, shownAt + spacing > .now { try? await Task.sleep(until: shownAt + spacing) }
            if Task.isCancelled { break }
            guard let text = followed.screen(), text != last else { continue }
            last = text
            shownAt = .now
            await screen(text)
        }
        if Task.isCancelled { throw AgentError(.cancelled, "following the screen of \(name) was cancelled") }
        if last == nil {
            // a session that ended between the look and the attach is not there either
            if let drawn = followed.clientOutput(), !drawn.contains("can't find session"), !drawn.contains("no sessions") {
                throw AgentError(.tmuxFailed, "the tmux client following \(name) on \(shell.displayName) drew nothing",
                                 detail: drawn)
            }
            throw AgentError(.sessionNotRunning, "no tmux session \(name) on \(shell.displayName)")
        }
    }
}

/// What `followScript` printed, read as it comes: the screens the loop on the host sent,
/// or the changes a tmux client drew, kept on a `VirtualTerminal`.
final class FollowedScreen: Sendable {
    private struct State {
        var header: [UInt8] = []
        var frames: ScreenFrameReader?
        var terminal: VirtualTerminal?
        var latest: String?
        /// What the client printed that was not drawn on its screen (its error), kept short.
        var printed: [UInt8] = []
        var everDrawn = false
    }
    private let state = Mutex(State())

    /// Takes a chunk of output; true when the screen may have changed.
    func take(_ chunk: [UInt8]) -> Bool {
        state.withLock { s in
            if s.terminal != nil { return Self.draw(chunk, &s) }
            if var reader = s.frames {
                let frames = reader.feed(chunk)
                s.frames = reader
                if let f = frames.last { s.latest = f }
                return !frames.isEmpty
            }
            // the first line of the script's says which (a line before it, such as a login
            // banner, is passed over)
            s.header += chunk
            while let nl = s.header.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: s.header[..<nl], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if line.hasPrefix("sshkit-follow "), let x = line.firstIndex(of: "x"),
                   let columns = Int(line[line.index(line.startIndex, offsetBy: 14) ..< x]),
                   let rows = Int(line[line.index(after: x)...]), (1...10_000).contains(columns), (1...10_000).contains(rows)
                {
                    s.terminal = VirtualTerminal(columns: columns, rows: rows)
                    let rest = Array(s.header[(nl + 1)...])
                    s.header = []
                    return rest.isEmpty ? false : Self.draw(rest, &s)
                }
                if line.hasPrefix("sshkit-screen ") {
                    var reader = ScreenFrameReader()
                    let frames = reader.feed(s.header)
                    s.header = []
                    s.frames = reader
                    if let f = frames.last { s.latest = f }
                    return !frames.isEmpty
                }
                s.header.removeSubrange(...nl)
            }
            if s.header.count > 65536 { s.header.removeAll() }
            return false
        }
    }

    /// Draws a chunk of the client's output on the screen kept here (changed in place).
    private static func draw(_ chunk: [UInt8], _ s: inout State) -> Bool {
        s.terminal?.feed(chunk)
        let drawing = s.terminal?.isAlternateScreen == true
        if drawing { s.everDrawn = true } else if !s.everDrawn, s.printed.count < 4096 { s.printed += chunk }
        return drawing
    }

    /// The screen now: nil before the first one, and while the client does not draw (it
    /// is on its own alternate screen while attached).
    func screen() -> String? {
        state.withLock { s in
            if let t = s.terminal { return t.isAlternateScreen ? t.text() : nil }
            return s.latest
        }
    }

    /// What a tmux client that never drew printed, or nil.
    func clientOutput() -> String? {
        state.withLock { s in
            guard s.terminal != nil, !s.everDrawn else { return nil }
            var t = VirtualTerminal(columns: 200, rows: 10)
            t.feed(s.printed)
            let text = ANSIText.lines(t.text()).map { $0.map(\.text).joined() }.joined(separator: "\n")
            return text.isEmpty ? nil : text
        }
    }
}

/// Reads the frames `followScript` prints in its loop: `sshkit-screen N`, then N bytes of
/// screen and a newline. The byte count, not a closing line, ends a screen, so any text on
/// it is taken as it is; frames split across reads are joined.
struct ScreenFrameReader {
    private var buffer: [UInt8] = []

    mutating func feed(_ chunk: [UInt8]) -> [String] {
        buffer += chunk
        var frames: [String] = []
        while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            let header = String(decoding: buffer[..<nl], as: UTF8.self)
            guard header.hasPrefix("sshkit-screen "), let n = Int(header.dropFirst(14)), n >= 0 else {
                buffer.removeSubrange(...nl) // not a header: skipped
                continue
            }
            let start = nl + 1
            guard buffer.count >= start + n + 1 else { break }
            frames.append(String(decoding: buffer[start ..< start + n], as: UTF8.self))
            buffer.removeSubrange(..<(start + n + 1))
        }
        return frames
    }
}
