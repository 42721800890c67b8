/// A git worktree the engine made for a task.
public struct Worktree: Sendable, Hashable, Codable {
    /// `<slug>-<unix ms>`.
    public var name: String
    /// The checkout it belongs to (absolute).
    public var projectPath: String
    /// `<project>/.emdash/worktrees/<name>` (absolute).
    public var path: String
    /// `emdash/<name>`.
    public var branch: String
    /// The ref it was made from, as chosen (`main`, `origin/main`, `HEAD`).
    public var baseRef: String
    /// The commit `baseRef` named at creation: what diffs compare against.
    public var baseCommit: String
    /// What happened while it was made that the user should hear of (the base could not
    /// be fetched, files were copied); not stored.
    public var notes: [String] = []

    private enum CodingKeys: String, CodingKey { case name, projectPath, path, branch, baseRef, baseCommit }

    public init(name: String, projectPath: String, path: String, branch: String, baseRef: String, baseCommit: String) {
        self.name = name
        self.projectPath = projectPath
        self.path = path
        self.branch = branch
        self.baseRef = baseRef
        self.baseCommit = baseCommit
    }
}

/// One entry of `git worktree list --porcelain`.
public struct WorktreeEntry: Sendable, Hashable {
    public var path: String
    /// nil for a bare repository.
    public var head: String?
    /// Without `refs/heads/`; nil when detached.
    public var branch: String?
    public var isBare: Bool
    public var isLocked: Bool
    /// git's own word that the folder is gone: `git worktree prune` removes the entry.
    public var isPrunable: Bool
    /// Whether it lies under `.emdash/worktrees/` (made by this engine or by Emdash).
    public var isManaged: Bool
}

/// One changed path of `git status --porcelain`.
public struct WorktreeChange: Sendable, Hashable {
    /// The two status letters (`" M"`, `"A "`, `"??"`, `"R "`).
    public var status: String
    public var path: String
    /// For a rename or copy: where it came from.
    public var originalPath: String?
    public var isUntracked: Bool { status == "??" }
}

/// What a worktree changed against its base.
public struct WorktreeDiff: Sendable, Hashable {
    public struct FileStat: Sendable, Hashable {
        public var path: String
        /// nil for binary files.
        public var added: Int?
        public var removed: Int?
        /// Not yet known to git (counted as added lines).
        public var isUntracked: Bool
    }

    public var files: [FileStat]
    public var totalAdded: Int { files.reduce(0) { $0 + ($1.added ?? 0) } }
    public var totalRemoved: Int { files.reduce(0) { $0 + ($1.removed ?? 0) } }
}

/// One file's patch, cut at a size cap.
public struct WorktreeFilePatch: Sendable, Hashable {
    public var path: String
    public var patch: String
    /// The patch was longer than the cap and was cut there.
    public var isTruncated: Bool
}
