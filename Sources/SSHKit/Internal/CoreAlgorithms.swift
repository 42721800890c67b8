internal import SSHCore

enum CoreAlgorithms {
    static func lists(_ a: SSHAlgorithms) -> [(sshcore_algo_kind, String, [String])] {
        var out: [(sshcore_algo_kind, String, [String])] = []
        func add(_ k: sshcore_algo_kind, _ label: String, _ v: [String]?) { if let v { out.append((k, label, v)) } }
        add(SSHCORE_ALGO_KEX, "key exchange", a.keyExchange)
        add(SSHCORE_ALGO_HOSTKEY, "host key", a.hostKey)
        add(SSHCORE_ALGO_CIPHER_C2S, "cipher client->server", a.ciphersClientToServer)
        add(SSHCORE_ALGO_CIPHER_S2C, "cipher server->client", a.ciphersServerToClient)
        add(SSHCORE_ALGO_MAC_C2S, "MAC client->server", a.macsClientToServer)
        add(SSHCORE_ALGO_MAC_S2C, "MAC server->client", a.macsServerToClient)
        add(SSHCORE_ALGO_COMPRESSION_C2S, "compression client->server", a.compression)
        add(SSHCORE_ALGO_COMPRESSION_S2C, "compression server->client", a.compression)
        add(SSHCORE_ALGO_PUBKEY_TYPES, "public key type", a.publicKeyAcceptedTypes)
        return out
    }

    static func unsupported(_ a: SSHAlgorithms) -> [String] {
        var bad: [String] = []
        for (kind, label, names) in lists(a) {
            if names.isEmpty { bad.append("\(label): (empty list)") }
            for n in names where sshcore_algorithm_supported(kind, n) == 0 { bad.append("\(label) \(n)") }
        }
        return bad
    }

    static func negotiated(_ conn: OpaquePointer) -> SSHNegotiatedAlgorithms {
        var n = sshcore_negotiated()
        sshcore_conn_negotiated(conn, &n)
        return SSHNegotiatedAlgorithms(
            keyExchange: CoreStrings.string(n.kex), hostKey: CoreStrings.string(n.hostkey),
            cipherClientToServer: CoreStrings.string(n.cipher_c2s), cipherServerToClient: CoreStrings.string(n.cipher_s2c),
            macClientToServer: CoreStrings.string(n.mac_c2s), macServerToClient: CoreStrings.string(n.mac_s2c))
    }
}
