import AgentSessions
import Crypto
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import SSHKit
import Synchronization

/// `agent-sessions serve`: the engine as pages for phones and browsers, from this machine,
/// over the connections the engine holds to each host. A front end like the command and the
/// cockpit: everything it does goes through the engine's door.
///
/// Who may come in: only a paired device (a random token in an HttpOnly, SameSite=Strict
/// cookie, checked on every request and WebSocket upgrade); requests that change anything
/// and every upgrade must come from the page's own origin; every action is kept in the
/// audit log with its device.
public final class ServeServer: Sendable {
    public struct Options: Sendable {
        /// Where to listen; loopback unless told otherwise.
        public var host: String = "127.0.0.1"
        public var port: Int = 7420
        /// Where xterm.js (Debian's node-xterm) is: the directory of its `lib`.
        public var xtermDirectory: String = "/usr/share/nodejs/xterm/lib"
        /// Mark the cookie Secure (when a TLS proxy is in front).
        public var secureCookie = false

        public init() {}

        public var isLoopback: Bool { ["127.0.0.1", "::1", "localhost"].contains(host) }
    }

    static let cookieName = "as_device"

    /// Warnings and errors only: the server's own start line is the command's.
    public static var quietLogger: Logger {
        var l = Logger(label: "agent-sessions.serve")
        l.logLevel = .warning
        return l
    }

    let engine: AgentOrchestrator
    let state: ServeState
    let options: Options
    let gate: DeviceGate
    let board: BoardFeed
    let push: PushSender
    let assets: ServeAssets
    let logger: Logger

    public init(engine: AgentOrchestrator, state: ServeState, options: Options,
                logger: Logger = ServeServer.quietLogger) {
        self.engine = engine
        self.state = state
        self.options = options
        self.logger = logger
        gate = DeviceGate(state: state)
        let push = PushSender(state: state)
        self.push = push
        board = BoardFeed(engine: engine) { payload in Task { await push.send(payload) } }
        assets = ServeAssets(xtermDirectory: options.xtermDirectory)
    }

    /// Serves until the task is cancelled or the process is told to stop (SIGINT, SIGTERM).
    /// `onListening` gets the address once the server listens (the port chosen for 0).
    public func run(onListening: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        board.start()
        defer { board.stop() }
        let watcher = Task { [gate] in
            // revocations made by `serve devices --revoke` end that device's sockets
            while !Task.isCancelled {
                gate.refresh()
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        defer { watcher.cancel() }
        let router = makeRouter()
        let host = options.host
        let app = Application(
            router: router,
            // a screen's burst is one frame; a client that does not answer a close (a phone
            // gone to sleep) is let go after 2 s, so stopping never waits long; a ping every
            // 30 s finds the dead ones. No permessage-deflate: a browser then compresses each
            // keystroke it sends, and the page's keystrokes measured slower with it
            server: .http1WebSocketUpgrade(webSocketRouter: router, configuration: .init(
                ws: .init(maxFrameSize: 1 << 20, autoPing: .enabled(timePeriod: .seconds(30)), closeTimeout: .seconds(2)))),
            configuration: ApplicationConfiguration(address: .hostname(host, port: options.port), serverName: "agent-sessions"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                onListening(host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)")
            },
            logger: logger)
        // SIGTERM and SIGINT stop it gracefully (the sockets closed, their clients given 2 s
        // to answer); a stop that takes longer is cancelled, and a cancel that hangs ends
        // the process, so that stopping is always bounded
        var group = ServiceGroupConfiguration(services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint],
                                              logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(5)
        group.maximumCancellationDuration = .seconds(5)
        try await ServiceGroup(configuration: group).run()
    }

    // MARK: the routes

    typealias Context = BasicWebSocketRequestContext

    func makeRouter() -> Router<Context> {
        let router = Router(context: Context.self)
        // pages
        router.get("/pair") { _, _ in Self.html(ServeAssets.pairPage) }
        router.get("/favicon.ico") { _, _ in Response(status: .noContent) }
        router.get("/") { [self] request, _ in
            guard device(request) != nil else { return Self.unpaired() }
            return Self.html(ServeAssets.boardPage)
        }
        router.get("/t/:task") { [self] request, _ in
            guard device(request) != nil else { return Self.unpaired() }
            return Self.html(ServeAssets.taskPage)
        }
        router.get("/static/:file") { [self] request, context in
            let file = context.parameters.get("file") ?? ""
            // what the pairing page needs is open; the rest only to a paired device
            guard ServeAssets.open.contains(file) || device(request) != nil else { return Self.unpaired() }
            return assets.response(file, ifNoneMatch: request.headers[.ifNoneMatch], acceptEncoding: request.headers[.acceptEncoding])
        }
        // pairing
        router.post("/api/pair") { [self] request, context in
            try await pair(request, context: context)
        }
        // the board
        router.get("/api/board") { [self] request, _ in
            guard device(request) != nil else { return Self.unpaired() }
            return Self.json(await board.current(), packedFor: request)
        }
        router.ws("/api/board/live") { [self] request, _ in
            try admitUpgrade(request)
        } onUpgrade: { [self] inbound, outbound, context in
            guard let device = device(context.request) else { return }
            let key = gate.opened(device: device.id) { Task { await Self.close(outbound, revoked: true) } }
            defer { gate.forget(key) }
            let updates = Task {
                for await text in board.updates() {
                    do { try await outbound.write(.text(text)) } catch { return }
                }
            }
            defer { updates.cancel() }
            // the socket lasts until the page closes it or the server does (a revoked
            // device, the server stopping): its end ends the updates
            try await withGracefulShutdownHandler {
                for try await _ in inbound.messages(maxSize: 4096) {}
            } onGracefulShutdown: {
                Task { await Self.close(outbound, revoked: false) }
            }
        }
        // Web Push: the server's key, and the device's subscription
        router.get("/sw.js") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "no-cache"],
                     body: .init(byteBuffer: ByteBuffer(string: ServeAssets.serviceWorker)))
        }
        router.get("/api/push/key") { [self] request, _ in
            guard device(request) != nil else { return Self.unpaired() }
            guard let key = push.publicKey else { return Self.error(.internalServerError, code: "storage", "no VAPID key") }
            return Self.json(["publicKey": key])
        }
        router.post("/api/push/subscribe") { [self] request, context in
            guard let device = device(request) else { return Self.unpaired() }
            guard Self.sameOrigin(request) else { return Self.error(.forbidden, code: "forbidden", "another origin") }
            struct Body: Decodable {
                struct Keys: Decodable { var p256dh, auth: String }
                var endpoint: String
                var keys: Keys
            }
            guard let body = try? await request.decode(as: Body.self, context: context) else {
                return Self.error(.badRequest, code: "invalidArgument", "give the subscription (endpoint, keys)")
            }
            if let refusal = Self.refusal(of: body.endpoint, p256dh: body.keys.p256dh, auth: body.keys.auth) {
                state.audit(device: device.id, action: "subscribe", outcome: "refused: \(refusal)")
                return Self.error(.badRequest, code: "invalidArgument", refusal)
            }
            do throws(ServeError) {
                try state.subscribe(PushSubscription(device: device.id, endpoint: body.endpoint, p256dh: body.keys.p256dh,
                                                     auth: body.keys.auth, createdAt: Date()))
            } catch {
                return Self.error(.internalServerError, code: "storage", error.message)
            }
            state.audit(device: device.id, action: "subscribe", target: URL(string: body.endpoint)?.host, outcome: "done")
            return Self.json(Done(message: "this device will be told when an agent needs you"))
        }
        // a task
        router.get("/api/tasks/:task") { [self] request, context in
            try await act(request, context, action: nil) { task in
                let record = try await task.record()
                let chats = try await task.chats()
                var agents: [ChatView] = []
                for chat in chats {
                    let r = try await chat.record()
                    // a stopped or ended agent is what its record says; a running one, what its host says
                    let status = r.state == .running ? try? await chat.status() : nil
                    var choices: [AgentAnswerChoice] = []
                    var questionKey: String?
                    if let status, status.activity == .waitingForInput, let screen = try? await chat.screen(lines: 60) {
                        choices = AgentAnswerChoice.offered(question: status.question, screen: screen)
                        questionKey = AgentAnswerChoice.questionKey(question: status.question, screen: screen)
                    }
                    agents.append(ChatView(id: r.id.rawValue, provider: r.providerID,
                                           state: status?.activity.name ?? BoardView.name(of: r.state),
                                           needsYou: status?.activity.needsYou ?? false, question: status?.question,
                                           questionKey: questionKey, choices: choices))
                }
                return Self.json(TaskView(id: record.id.rawValue, title: record.title, branch: record.worktree.branch,
                                          project: record.projectID.rawValue, attempt: record.attempt?.label, port: record.port,
                                          archived: record.archivedAt != nil, agents: agents))
            }
        }
        router.get("/api/tasks/:task/diff") { [self] request, context in
            try await act(request, context, action: nil) { task in
                let diff = try await task.diff()
                return Self.json(diff.files.map { FileView(path: $0.path, added: $0.added, removed: $0.removed, untracked: $0.isUntracked) })
            }
        }
        router.get("/api/tasks/:task/patch") { [self] request, context in
            let path = request.uri.queryParameters.get("path") ?? ""
            return try await act(request, context, action: nil) { task in
                let p = try await task.patch(file: path)
                return Self.json(PatchView(path: p.path, patch: p.patch, truncated: p.isTruncated), packedFor: request)
            }
        }
        router.post("/api/tasks/:task/stop") { [self] request, context in
            try await act(request, context, action: "stop") { task in
                try await task.stop()
                return Self.json(Done(message: "stopped"))
            }
        }
        router.post("/api/tasks/:task/resume") { [self] request, context in
            try await act(request, context, action: "resume") { task in
                let resumed = try await task.resume()
                return Self.json(Done(message: "resumed \(resumed.count) agent\(resumed.count == 1 ? "" : "s")"))
            }
        }
        router.post("/api/tasks/:task/commit") { [self] request, context in
            let body = try? await request.decode(as: Line.self, context: context)
            return try await act(request, context, action: "commit") { task in
                let c = try await task.commit(message: body?.text?.isEmpty == false ? body?.text : nil)
                return Self.json(Done(message: "committed \(c.files) file\(c.files == 1 ? "" : "s") as \(c.commit.prefix(12))"))
            }
        }
        router.post("/api/tasks/:task/push") { [self] request, context in
            try await act(request, context, action: "push") { task in
                let p = try await task.push()
                return Self.json(Done(message: p.wasUpToDate ? "\(p.branch) was up to date on \(p.remote)"
                                                             : "pushed \(p.commits) commit\(p.commits == 1 ? "" : "s") to \(p.remote)/\(p.branch)"))
            }
        }
        router.post("/api/chats/:chat/send") { [self] request, context in
            let body = try? await request.decode(as: Line.self, context: context)
            return try await actOnChat(request, context, action: "send") { chat in
                guard let text = body?.text, !text.isEmpty else { throw AgentError(.invalidArgument, "nothing to send") }
                try await chat.send(text)
                return Self.json(Done(message: "sent"))
            }
        }
        // an answer is bound to the question it answers: refused once the agent asks
        // something else (or nothing), or when the screen no longer offers it
        router.post("/api/chats/:chat/answer") { [self] request, context in
            struct Body: Decodable {
                var question: String
                var keys: String
            }
            let body = try? await request.decode(as: Body.self, context: context)
            return try await actOnChat(request, context, action: "answer") { chat in
                guard let body else { throw AgentError(.invalidArgument, "give the question and the answer's keys") }
                let status = try await chat.status()
                let screen = try await chat.screen(lines: 60)
                guard status.activity == .waitingForInput,
                      AgentAnswerChoice.questionKey(question: status.question, screen: screen) == body.question
                else {
                    throw AgentError(.sessionNotRunning, "the agent no longer asks that; it is \(status.activity.name) now")
                }
                let offered = AgentAnswerChoice.offered(question: status.question, screen: screen)
                guard let choice = offered.first(where: { $0.keys == body.keys }) else {
                    throw AgentError(.sessionNotRunning, "the agent's screen no longer offers that answer")
                }
                try await chat.send(choice.keys, pressEnter: choice.enter)
                return Self.json(Done(message: "answered: \(choice.label)"))
            }
        }
        router.ws("/api/chats/:chat/terminal") { [self] request, _ in
            try admitUpgrade(request)
        } onUpgrade: { [self] inbound, outbound, context in
            try await terminal(inbound: inbound, outbound: outbound, context: context)
        }
        addWorkRoutes(to: router)
        return router
    }

    // MARK: who may come in

    func device(_ request: Request) -> ServeDevice? {
        gate.device(token: request.cookies[Self.cookieName]?.value)
    }

    /// Whether a request that changes something comes from the page's own origin. A
    /// refused WebSocket upgrade is answered 400 and closed by the WebSocket library (it
    /// has no other answer for an upgrade it does not make); the refusal is in the audit log.
    static func sameOrigin(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin], let host = request.head.authority else {
            return false
        }
        return origin == "http://\(host)" || origin == "https://\(host)"
    }

    func admitUpgrade(_ request: Request) throws -> RouterShouldUpgrade {
        guard let device = device(request) else {
            state.audit(device: nil, action: "upgrade", target: request.uri.path, outcome: "refused: not paired")
            throw HTTPError(.unauthorized, message: "this device is not paired: agent-sessions serve pair")
        }
        guard Self.sameOrigin(request) else {
            state.audit(device: device.id, action: "upgrade", target: request.uri.path, outcome: "refused: another origin")
            throw HTTPError(.forbidden, message: "another origin")
        }
        return .upgrade([:])
    }

    private func pair(_ request: Request, context: Context) async throws -> Response {
        guard Self.sameOrigin(request) else {
            state.audit(device: nil, action: "pair", outcome: "refused: another origin")
            return Self.error(.forbidden, code: "forbidden", "another origin")
        }
        guard gate.mayTryPairing() else {
            state.audit(device: nil, action: "pair", outcome: "refused: too many attempts")
            return Self.error(.tooManyRequests, code: "tooManyAttempts", "too many pairing attempts; wait a minute")
        }
        struct Body: Decodable {
            var code: String
            var name: String?
        }
        guard let body = try? await request.decode(as: Body.self, context: context) else {
            return Self.error(.badRequest, code: "invalidArgument", "give the code")
        }
        do throws(ServeError) {
            let (device, token) = try state.pair(code: body.code, name: body.name ?? "")
            gate.refresh()
            state.audit(device: device.id, action: "pair", target: device.name, outcome: "paired")
            var response = Self.json(Done(message: "paired as \(device.name)"))
            let secure = options.secureCookie || request.headers[.init("X-Forwarded-Proto")!] == "https"
            response.headers[.setCookie] = "\(Self.cookieName)=\(token); Path=/; Max-Age=31536000; HttpOnly; SameSite=Strict"
                + (secure ? "; Secure" : "")
            return response
        } catch {
            gate.pairingFailed()
            state.audit(device: nil, action: "pair", outcome: "refused: \(error.message)")
            return Self.error(.unauthorized, code: "pairingRefused", error.message)
        }
    }

    /// What is wrong with a subscription, nil when nothing: the endpoint must be HTTPS (or
    /// plain HTTP on loopback), the key an uncompressed P-256 point, the secret 16 bytes.
    static func refusal(of endpoint: String, p256dh: String, auth: String) -> String? {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else {
            return "the endpoint is not a URL"
        }
        guard scheme == "https" || (scheme == "http" && ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)) else {
            return "the endpoint must be https"
        }
        guard let key = WebPushCrypto.data(base64url: p256dh), key.count == 65, key.first == 4,
              (try? P256.KeyAgreement.PublicKey(x963Representation: key)) != nil else {
            return "p256dh is not a P-256 public key"
        }
        guard WebPushCrypto.data(base64url: auth)?.count == 16 else { return "auth is not 16 bytes" }
        return nil
    }

    // MARK: acting through the door

    /// Runs `body` on the request's task for a paired device (and, for an action, from the
    /// page's origin), mapping the engine's errors to HTTP statuses and keeping the action
    /// in the audit log.
    func act(_ request: Request, _ context: Context, action: String?,
             _ body: (TaskHandle) async throws -> Response) async throws -> Response {
        let id = context.parameters.get("task") ?? ""
        return try await acting(request, action: action, target: id) { try await body(engine.task(TaskID(id))) }
    }

    func actOnChat(_ request: Request, _ context: Context, action: String,
                   _ body: (ChatHandle) async throws -> Response) async throws -> Response {
        let id = context.parameters.get("chat") ?? ""
        return try await acting(request, action: action, target: id) { try await body(engine.chat(ChatID(id))) }
    }

    /// The rules every route keeps: a paired device; for an action (a name to audit it
    /// by), the page's own origin and a line in the audit log however it ends. The
    /// engine's errors come out as HTTP statuses (`status(of:)`).
    func acting(_ request: Request, action: String?, target: String?,
                _ body: () async throws -> Response) async throws -> Response {
        guard let device = device(request) else { return Self.unpaired() }
        if let action, !Self.sameOrigin(request) {
            state.audit(device: device.id, action: action, target: target, outcome: "refused: another origin")
            return Self.error(.forbidden, code: "forbidden", "another origin")
        }
        do {
            let response = try await body()
            if let action { state.audit(device: device.id, action: action, target: target, outcome: "done") }
            return response
        } catch let e as AgentError {
            if let action { state.audit(device: device.id, action: action, target: target, outcome: "refused: \(e.code.name)") }
            return Self.error(e)
        }
    }

    /// The agent's terminal: its screen out as binary messages, keystrokes in as binary
    /// messages, `{"cols":…,"rows":…}` text messages to resize.
    private func terminal(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
                          context: WebSocketRouterContext<Context>) async throws {
        guard let device = device(context.request) else { return }
        let id = context.requestContext.parameters.get("chat") ?? ""
        let query = context.request.uri.queryParameters
        let size = SSHTerminalSize(columns: min(500, max(20, query.get("cols", as: Int.self) ?? 80)),
                                   rows: min(300, max(5, query.get("rows", as: Int.self) ?? 24)))
        let term: AgentTerminal
        do {
            term = try await engine.chat(ChatID(id)).attach(size: size)
        } catch {
            state.audit(device: device.id, action: "terminal", target: id, outcome: "refused: \(error.code.name)")
            try? await outbound.write(.text(#"{"error":"# + Self.quoted(error.message) + "}"))
            try? await outbound.close(.normalClosure, reason: nil)
            return
        }
        state.audit(device: device.id, action: "terminal", target: id, outcome: "opened")
        let key = gate.opened(device: device.id) {
            term.cancel()
            Task { await Self.close(outbound, revoked: true) }
        }
        defer {
            gate.forget(key)
            term.cancel()
        }
        let pump = Task {
            for await chunk in term.output {
                do { try await outbound.write(.binary(ByteBuffer(bytes: chunk))) } catch { break }
            }
            try? await outbound.close(.normalClosure, reason: "the agent's session ended")
        }
        defer { pump.cancel() }
        struct Resize: Decodable {
            var cols: Int
            var rows: Int
        }
        try await withGracefulShutdownHandler {
            for try await message in inbound.messages(maxSize: 1 << 20) {
                switch message {
                case .binary(let buffer):
                    do { try await term.input.write(Array(buffer.readableBytesView)) } catch { return }
                case .text(let text):
                    if let r = try? JSONDecoder().decode(Resize.self, from: Data(text.utf8)) {
                        try? term.resize(to: SSHTerminalSize(columns: min(500, max(20, r.cols)), rows: min(300, max(5, r.rows))))
                    }
                }
            }
        } onGracefulShutdown: {
            term.cancel()
            Task { await Self.close(outbound, revoked: false) }
        }
    }

    /// Closes a socket the server ends: 1008 for a revoked device (the page goes to the
    /// pairing page), 1001 when the server stops (the page tries again).
    static func close(_ outbound: WebSocketOutboundWriter, revoked: Bool) async {
        try? await outbound.close(revoked ? .policyViolation : .goingAway, reason: revoked ? "revoked" : "the server is stopping")
    }

    // MARK: responses

    struct Done: Encodable { var message: String }
    struct Line: Decodable { var text: String? }
    struct ChatView: Encodable {
        var id, provider, state: String
        var needsYou: Bool
        var question: String?
        /// What an answer names the question by (AgentAnswerChoice.questionKey).
        var questionKey: String?
        var choices: [AgentAnswerChoice]
    }
    struct TaskView: Encodable {
        var id, title, branch, project: String
        /// Its label when it is one of several attempts at a work.
        var attempt: String?
        /// Its own port on its host (`PORT`).
        var port: Int?
        var archived: Bool
        var agents: [ChatView]
    }
    struct FileView: Encodable {
        var path: String
        var added, removed: Int?
        var untracked: Bool
    }
    struct PatchView: Encodable {
        var path, patch: String
        var truncated: Bool
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    /// The value as JSON; gzipped when `request` takes gzip and it is over 1 KB (the board is
    /// 40 KB at 100 tasks, a patch may be more).
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, packedFor request: Request? = nil) -> Response {
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]
        var body = ByteBuffer(bytes: data)
        if let request, data.count > 1024, let accepts = request.headers[.acceptEncoding], ServeAssets.takesGzip(accepts) {
            if let packed = ServeAssets.gzipped(body) {
                body = packed
                headers[.contentEncoding] = "gzip"
            }
            headers[.vary] = "Accept-Encoding"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func html(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                                        .contentSecurityPolicy: ServeAssets.contentSecurityPolicy,
                                        .init("X-Content-Type-Options")!: "nosniff",
                                        .init("Referrer-Policy")!: "no-referrer"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func unpaired() -> Response {
        error(.unauthorized, code: "notPaired", "this device is not paired: run agent-sessions serve pair and open /pair")
    }

    static func error(_ status: HTTPResponse.Status, code: String, _ message: String) -> Response {
        struct Body: Encodable { var error, message: String }
        return json(Body(error: code, message: message), status: status)
    }

    /// The engine's error codes as HTTP statuses (one table, as the command has for exit statuses).
    static func status(of code: AgentError.Code) -> HTTPResponse.Status {
        switch code {
        case .notFound: .notFound
        case .invalidArgument, .invalidEnvironmentName, .unknownProvider, .ambiguous, .shellNotAllowed: .badRequest
        case .taskArchived, .nameTaken, .hasTasks, .checkoutHasChanges, .nothingToLand, .notTheSameProject, .notAnAttempt,
             .worktreeHasUnsavedWork, .mergeConflict, .sessionNotRunning, .noRemote, .noForge:
            .conflict
        case .transport, .tmuxUnavailable, .tmuxFailed, .agentUnavailable, .gitFailed, .notAGitRepository: .badGateway
        default: .internalServerError
        }
    }

    static func error(_ e: AgentError) -> Response {
        error(status(of: e.code), code: e.code.name, e.message)
    }

    static func quoted(_ s: String) -> String {
        String(decoding: (try? JSONEncoder().encode(s)) ?? Data("\"\"".utf8), as: UTF8.self)
    }
}
