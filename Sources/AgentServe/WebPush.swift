import AgentSessions
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// A browser's push subscription (what `PushManager.subscribe` gives), kept for the
/// device that made it.
public struct PushSubscription: Codable, Sendable, Equatable {
    public var device: String
    public var endpoint: String
    /// The browser's P-256 key, uncompressed, base64url.
    public var p256dh: String
    /// The 16-byte authentication secret, base64url.
    public var auth: String
    public var createdAt: Date
}

/// Web Push as RFC 8291 (message encryption, `aes128gcm` of RFC 8188) and RFC 8292 (VAPID)
/// say, on swift-crypto: nothing of it written by hand but the framing.
enum WebPushCrypto {
    /// The body of a push message for a subscription: a random salt, the record size, the
    /// sender's ephemeral public key, and the payload (with its delimiter) sealed with
    /// AES-128-GCM under keys derived (HKDF-SHA-256) from an ECDH with the browser's key
    /// and its authentication secret.
    static func encrypt(_ payload: Data, p256dh: Data, auth: Data,
                        salt: Data = Data((0..<16).map { _ in UInt8.random(in: .min ... .max) }),
                        sender: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey()) throws -> Data {
        let receiver = try P256.KeyAgreement.PublicKey(x963Representation: p256dh)
        let shared = try sender.sharedSecretFromKeyAgreement(with: receiver)
        let senderPublic = sender.publicKey.x963Representation
        // IKM = HKDF(auth, ecdh, "WebPush: info" || 0 || ua_public || as_public, 32)
        let secret = shared.withUnsafeBytes { Data($0) }
        let keyInfo = Data("WebPush: info".utf8) + [0] + p256dh + senderPublic
        let prkKey = HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: secret), salt: auth)
        let ikm = HKDF<SHA256>.expand(pseudoRandomKey: prkKey, info: keyInfo, outputByteCount: 32)
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
        let cek = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        let sealed = try AES.GCM.seal(payload + [2], using: cek,
                                      nonce: AES.GCM.Nonce(data: nonce.withUnsafeBytes { Data($0) }))
        let recordSize: UInt32 = 4096
        var body = salt
        body += withUnsafeBytes(of: recordSize.bigEndian) { Data($0) }
        body += [UInt8(senderPublic.count)]
        body += senderPublic
        body += sealed.ciphertext + sealed.tag
        return body
    }

    /// `Authorization: vapid t=JWT, k=KEY` for a push to `endpoint`: an ES256 JWT whose
    /// audience is the endpoint's origin, valid 12 hours.
    static func vapidAuthorization(endpoint: URL, key: P256.Signing.PrivateKey, subject: String,
                                   now: Date = Date()) throws -> String {
        guard let scheme = endpoint.scheme, let host = endpoint.host else {
            throw ServeError(.invalidArgument, "the push endpoint \(endpoint) has no origin")
        }
        let audience = "\(scheme)://\(host)" + (endpoint.port.map { ":\($0)" } ?? "")
        let header = base64url(Data(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims: [String: Any] = ["aud": audience, "exp": Int(now.timeIntervalSince1970) + 12 * 3600, "sub": subject]
        let body = base64url(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let input = header + "." + body
        let signature = try key.signature(for: Data(input.utf8)).rawRepresentation
        return "vapid t=\(input).\(base64url(signature)), k=\(base64url(key.publicKey.x963Representation))"
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(base64url text: String) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }
}

extension ServeState {
    var vapidPath: String { directory + "/vapid.json" }
    var pushPath: String { directory + "/push.json" }

    /// The server's VAPID key: made on first use and kept (0600).
    func vapidKey() throws(ServeError) -> P256.Signing.PrivateKey {
        struct Stored: Codable { var privateKey: String }
        return try locked { () throws(ServeError) -> P256.Signing.PrivateKey in
            if let stored: Stored = try read(vapidPath), let raw = WebPushCrypto.data(base64url: stored.privateKey),
               let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) {
                return key
            }
            let key = P256.Signing.PrivateKey()
            try write(Stored(privateKey: WebPushCrypto.base64url(key.rawRepresentation)), to: vapidPath)
            return key
        }
    }

    /// The push subscriptions of every device.
    public func pushSubscriptions() throws(ServeError) -> [PushSubscription] {
        try locked { () throws(ServeError) in try read(pushPath) ?? [] }
    }

    /// Keeps `subscription` (replacing one with its endpoint).
    func subscribe(_ subscription: PushSubscription) throws(ServeError) {
        try locked { () throws(ServeError) in
            var all: [PushSubscription] = try read(pushPath) ?? []
            all.removeAll { $0.endpoint == subscription.endpoint }
            all.append(subscription)
            try write(all, to: pushPath)
        }
    }

    /// Drops the subscriptions matching `where` (an endpoint gone, a device revoked).
    func unsubscribe(where matches: (PushSubscription) -> Bool) throws(ServeError) {
        try locked { () throws(ServeError) in
            var all: [PushSubscription] = try read(pushPath) ?? []
            let before = all.count
            all.removeAll(where: matches)
            if all.count != before { try write(all, to: pushPath) }
        }
    }
}

/// Sends a push to every subscription when an agent comes to need you (waiting for input,
/// done). The payload names the task, its host, the agent and its state, never code or a
/// screen; a subscription its push service says is gone (404, 410) is dropped.
final class PushSender: Sendable {
    let state: ServeState
    let subject: String
    private let key: P256.Signing.PrivateKey?

    init(state: ServeState, subject: String = "mailto:agent-sessions@localhost") {
        self.state = state
        self.subject = subject
        key = try? state.vapidKey()
    }

    var publicKey: String? { key.map { WebPushCrypto.base64url($0.publicKey.x963Representation) } }

    struct Payload: Codable, Sendable {
        var task: String
        var title: String
        var host: String
        var agent: String
        var state: String
        var url: String
    }

    /// Sends `payload` to every subscription, at once; returns when each has answered.
    func send(_ payload: Payload) async {
        guard let key, let subscriptions = try? state.pushSubscriptions(), !subscriptions.isEmpty,
              let body = try? JSONEncoder().encode(payload) else { return }
        await withTaskGroup(of: Void.self) { group in
            for s in subscriptions {
                group.addTask { await self.deliver(body, to: s, key: key) }
            }
        }
    }

    private func deliver(_ body: Data, to s: PushSubscription, key: P256.Signing.PrivateKey) async {
        guard let url = URL(string: s.endpoint), let p256dh = WebPushCrypto.data(base64url: s.p256dh),
              let auth = WebPushCrypto.data(base64url: s.auth),
              let sealed = try? WebPushCrypto.encrypt(body, p256dh: p256dh, auth: auth),
              let authorization = try? WebPushCrypto.vapidAuthorization(endpoint: url, key: key, subject: subject)
        else { return }
        var request = URLRequest(url: url, timeoutInterval: 15)
        request.httpMethod = "POST"
        request.setValue("aes128gcm", forHTTPHeaderField: "Content-Encoding")
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        request.setValue("86400", forHTTPHeaderField: "TTL")
        request.setValue("high", forHTTPHeaderField: "Urgency")
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        let status: Int
        do {
            let (_, response) = try await URLSession.shared.upload(for: request, from: sealed)
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
        } catch {
            state.audit(device: s.device, action: "push", target: url.host, outcome: "failed: \(error.localizedDescription)")
            return
        }
        if status == 404 || status == 410 {
            try? state.unsubscribe { $0.endpoint == s.endpoint }
            state.audit(device: s.device, action: "push", target: url.host, outcome: "subscription gone (\(status)); dropped")
        } else if !(200..<300).contains(status) {
            state.audit(device: s.device, action: "push", target: url.host, outcome: "refused: HTTP \(status)")
        }
    }
}
