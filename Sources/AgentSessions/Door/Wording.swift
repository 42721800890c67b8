/// How the engine and its front ends write a count in a sentence.
public enum Wording {
    /// `n` and the noun, singular for one and plural otherwise, as git writes its counts:
    /// `count(1, "file")` is "1 file", `count(3, "file")` "3 files", `count(0, "host")`
    /// "0 hosts". `plural` is for a noun that does not take an `s` ("1 match", "2 matches").
    public static func count(_ n: Int, _ noun: String, plural: String? = nil) -> String {
        "\(n) \(n == 1 ? noun : plural ?? noun + "s")"
    }
}
