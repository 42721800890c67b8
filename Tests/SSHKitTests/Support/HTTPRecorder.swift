import Foundation

/// A small HTTP server on 127.0.0.1 (python3's http.server) that records each POST as
/// one JSON line `{"path", "headers", "body"}` and answers 200, or 503 to a path that
/// starts with `/down`: a webhook or ntfy server of the test's own.
final class HTTPRecorder: Sendable {
    let daemon: Daemon
    let port: Int
    let dir: String

    static let script = #"""
        import http.server, json, sys
        log = open(sys.argv[1], "a")
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode("utf-8", "replace")
                if self.path.startswith("/down"):
                    self.send_response(503); self.end_headers(); return
                log.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body}) + "\n"); log.flush()
                self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
        s = http.server.HTTPServer(("127.0.0.1", 0), H)
        print(s.server_address[1], flush=True)
        s.serve_forever()
        """#

    init() throws {
        dir = try TestPaths.makeTemporaryDirectory("http-recorder")
        try Self.script.write(toFile: dir + "/server.py", atomically: true, encoding: .utf8)
        daemon = try Daemon.spawn("/usr/bin/python3", [dir + "/server.py", dir + "/requests.jsonl"], log: dir + "/server.log")
        var found: Int?
        for _ in 0..<200 where found == nil {
            let text = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
            found = text.split(separator: "\n").first.flatMap { Int($0) }
            if found == nil { usleep(25_000) }
        }
        guard let found else {
            daemon.stop()
            throw FixtureError("the HTTP recorder did not start")
        }
        port = found
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// The requests so far: path, headers, body.
    func requests() -> [(path: String, headers: [String: String], body: String)] {
        let text = (try? String(contentsOfFile: dir + "/requests.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return (o["path"] as? String ?? "", o["headers"] as? [String: String] ?? [:], o["body"] as? String ?? "")
        }
    }

    func stop() {
        daemon.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}
