import Foundation
import Hummingbird
import NIOCore

/// The pages, their script and style, and xterm.js: all served by the tool itself, never
/// from elsewhere. xterm.js is Debian's build (node-xterm, CommonJS modules), joined once
/// into one script the browser can load.
struct ServeAssets: Sendable {
    /// Files a page may load before its device is paired.
    static let open: Set<String> = ["app.css", "pair.js"]

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    private let files: [String: (type: String, body: String)]

    init(xtermDirectory: String) {
        var files: [String: (String, String)] = [
            "app.css": ("text/css; charset=utf-8", Self.css),
            "app.js": ("text/javascript; charset=utf-8", Self.appScript),
            "board.js": ("text/javascript; charset=utf-8", Self.boardScript),
            "task.js": ("text/javascript; charset=utf-8", Self.taskScript),
            "pair.js": ("text/javascript; charset=utf-8", Self.pairScript),
            "new.js": ("text/javascript; charset=utf-8", Self.newTaskScript),
        ]
        if let bundle = Self.bundleXterm(xtermDirectory) {
            files["xterm.js"] = ("text/javascript; charset=utf-8", bundle)
        }
        if let css = try? String(contentsOfFile: xtermDirectory + "/xterm.css", encoding: .utf8) {
            files["xterm.css"] = ("text/css; charset=utf-8", css)
        }
        self.files = files
    }

    var hasTerminal: Bool { files["xterm.js"] != nil }

    func response(_ name: String) -> Response {
        guard let file = files[name] else {
            let hint = name.hasPrefix("xterm") ? "xterm.js is not installed here (Debian: apt-get install node-xterm)" : "no such file"
            return ServeServer.error(.notFound, code: "notFound", hint)
        }
        return Response(status: .ok, headers: [.contentType: file.type, .cacheControl: "no-cache",
                                               .init("X-Content-Type-Options")!: "nosniff"],
                        body: .init(byteBuffer: ByteBuffer(string: file.body)))
    }

    /// Joins the CommonJS modules under `directory` (tests left out) into one script that
    /// defines `window.Terminal`: each module in a function, `require` resolving paths
    /// relative to the module that asks.
    static func bundleXterm(_ directory: String) -> String? {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return nil }
        var modules: [(String, String)] = []
        for case let path as String in walker where path.hasSuffix(".js") && !path.hasSuffix(".test.js") {
            guard let text = try? String(contentsOfFile: directory + "/" + path, encoding: .utf8) else { continue }
            modules.append((String(path.dropLast(3)), text))
        }
        guard modules.contains(where: { $0.0 == "public/Terminal" }) else { return nil }
        var out = """
            (function () {
            'use strict';
            var defs = {}, cache = {};
            function resolve(from, name) {
              if (name.charAt(0) !== '.') return name;
              var parts = from.split('/'); parts.pop();
              name.split('/').forEach(function (p) {
                if (p === '..') parts.pop(); else if (p !== '.') parts.push(p);
              });
              var path = parts.join('/');
              return defs[path] ? path : path + '/index';
            }
            function load(path) {
              if (cache[path]) return cache[path].exports;
              var module = { exports: {} };
              cache[path] = module;
              defs[path](module.exports, function (n) { return load(resolve(path, n)); }, module);
              return module.exports;
            }

            """
        for (path, text) in modules.sorted(by: { $0.0 < $1.0 }) {
            let source = text.replacingOccurrences(of: "//# sourceMappingURL=", with: "// map: ")
            out += "defs[\(ServeServer.quoted(path))] = function (exports, require, module) {\n\(source)\n};\n"
        }
        out += "var xt = load('public/Terminal');\nwindow.Terminal = xt.Terminal || xt;\n})();\n"
        return out
    }
}
