import CompressNIO
import Foundation
import Hummingbird
import NIOCore

/// The pages, their script and style, and xterm.js: all served by the tool itself, never
/// from elsewhere. xterm.js is Debian's build (node-xterm, CommonJS modules), joined once
/// into one script the browser can load. Each is kept as sent: gzipped once at the start for
/// a browser that takes gzip, and named by a tag of its content, so a page loaded again
/// revalidates its files (`304 Not Modified`) instead of fetching them.
struct ServeAssets: Sendable {
    /// Files a page may load before its device is paired.
    static let open: Set<String> = ["app.css", "pair.js"]

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    struct File: Sendable {
        var type: String
        var body: ByteBuffer
        /// The body gzipped, when that is smaller.
        var gzipped: ByteBuffer?
        /// A weak entity tag: the same content, gzipped or not, is the same file.
        var tag: String

        init(type: String, text: String) {
            self.type = type
            body = ByteBuffer(string: text)
            gzipped = ServeAssets.gzipped(body, level: 9)
            tag = "W/\"" + ServeState.hash(text).prefix(24) + "\""
        }
    }

    private let files: [String: File]

    init(xtermDirectory: String) {
        var files: [String: File] = [
            "app.css": File(type: "text/css; charset=utf-8", text: Self.css),
            "app.js": File(type: "text/javascript; charset=utf-8", text: Self.appScript),
            "board.js": File(type: "text/javascript; charset=utf-8", text: Self.boardScript),
            "task.js": File(type: "text/javascript; charset=utf-8", text: Self.taskScript),
            "pair.js": File(type: "text/javascript; charset=utf-8", text: Self.pairScript),
            "new.js": File(type: "text/javascript; charset=utf-8", text: Self.newTaskScript),
        ]
        if let bundle = Self.bundleXterm(xtermDirectory) {
            files["xterm.js"] = File(type: "text/javascript; charset=utf-8", text: bundle)
        }
        if let css = try? String(contentsOfFile: xtermDirectory + "/xterm.css", encoding: .utf8) {
            files["xterm.css"] = File(type: "text/css; charset=utf-8", text: css)
        }
        self.files = files
    }

    var hasTerminal: Bool { files["xterm.js"] != nil }

    /// The file, gzipped when `acceptEncoding` takes gzip; `304 Not Modified` when
    /// `ifNoneMatch` names its tag.
    func response(_ name: String, ifNoneMatch: String? = nil, acceptEncoding: String? = nil) -> Response {
        guard let file = files[name] else {
            let hint = name.hasPrefix("xterm") ? "xterm.js is not installed here (Debian: apt-get install node-xterm)" : "no such file"
            return ServeServer.error(.notFound, code: "notFound", hint)
        }
        var headers: HTTPFields = [.cacheControl: "no-cache", .eTag: file.tag, .vary: "Accept-Encoding"]
        if let ifNoneMatch, Self.matches(ifNoneMatch, tag: file.tag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = file.type
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        if let packed = file.gzipped, let acceptEncoding, Self.takesGzip(acceptEncoding) {
            headers[.contentEncoding] = "gzip"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: packed))
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: file.body))
    }

    /// `body` gzipped (zlib's `level`, 1 to 9), or nil when that is not smaller.
    static func gzipped(_ body: ByteBuffer, level: Int32 = 6) -> ByteBuffer? {
        var source = body
        guard let packed = try? source.compress(with: .gzip(configuration: .init(compressionLevel: level))),
              packed.readableBytes < body.readableBytes
        else { return nil }
        return packed
    }

    /// Whether an `If-None-Match` names `tag` (compared weakly, as RFC 9110 says for it).
    static func matches(_ ifNoneMatch: String, tag: String) -> Bool {
        func opaque(_ t: Substring) -> Substring {
            let t = t.trimmingCharacters(in: .whitespaces)[...]
            return t.hasPrefix("W/") ? t.dropFirst(2) : t
        }
        let wanted = opaque(tag[...])
        return ifNoneMatch.split(separator: ",").contains { opaque($0) == wanted || opaque($0) == "*" }
    }

    /// Whether an `Accept-Encoding` takes gzip: named (or `*`) without `q=0`.
    static func takesGzip(_ acceptEncoding: String) -> Bool {
        var gzip: Bool?, any: Bool?
        for item in acceptEncoding.lowercased().split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let coding = parts.first else { continue }
            let refused = parts.dropFirst().contains { p in
                p.hasPrefix("q=") && (Double(p.dropFirst(2)) ?? 1) == 0
            }
            if coding == "gzip" || coding == "x-gzip" { gzip = !refused } else if coding == "*" { any = !refused }
        }
        return gzip ?? any ?? false
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
