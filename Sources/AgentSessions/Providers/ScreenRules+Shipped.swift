extension AgentScreenRules {
    /// The shipped rules, in the text form `AgentScreenRules.parse` reads (the rule ids
    /// are `shipped:<line>`). The rules for Vibe, Kimi and Hermes were written from their
    /// screens (mistral-vibe 3.0, kimi-cli 1.51, hermes-agent 0.19) in a tmux pane, and
    /// are checked against recordings of those screens by the tests; the others from the
    /// agents' sources and documentation.
    static let shippedText = #"""
        # Screen rules shipped with agent-sessions. A user's own file (same form) comes
        # first; see AgentScreenRules for the form.

        [*]
        waiting   \((y/n|Y/n|y/N)\)
        waiting   \[(y/n|Y/n|y/N)\]
        waiting   ^(Press|press) [Ee]nter to continue
        waiting   Do you want to (proceed|continue)\?

        [claude]
        waiting   Do you want to (proceed|make this edit|create|run|allow)
        waiting   No, and tell Claude what to do differently
        question  Do you want to
        limit     (usage limit reached|limit reached.*resets|Claude AI usage limit)
        working   esc to interrupt
        idle      \? for shortcuts
        lines     25

        [codex]
        waiting   (Would you like to run the following command|Allow command)\?
        waiting   Would you like to make the following edits\?
        question  Would you like to
        limit     You've hit your usage limit
        working   esc to interrupt\)
        idle      send +[^ ]* newline
        lines     25

        [gemini]
        waiting   (Allow execution|Apply this change|Allow execution of)\?
        waiting   Yes, allow once
        question  (Allow execution|Apply this change)
        limit     (Quota exceeded|RESOURCE_EXHAUSTED|rate limit)
        working   esc to cancel
        idle      Type your message
        lines     25

        [qwen]
        waiting   (Allow execution|Apply this change|Allow execution of)\?
        waiting   Yes, allow once
        question  (Allow execution|Apply this change)
        limit     (Quota exceeded|rate limit)
        working   esc to cancel
        idle      Type your message
        lines     25

        # Mistral Vibe 3: a dialog box "Permission for the <tool> tool (...)" with
        # "1. Allow once" and the title "? Vibe"; while it works, "Generating… (3s
        # Esc/Ctrl+C to interrupt)" and the title ">> Vibe"; its logo animates (the three
        # lines beside it).
        [mistral]
        waiting   ^│ +1\. Allow once
        question  Permission for the
        limit     Rate limits? exceeded
        title-waiting  ^\? 
        title-working  ^>> 
        working   Esc/Ctrl\+C to interrupt\)
        idle      ^>$
        ignore    Mistral Vibe v[0-9]
        ignore    \[(on|off)\]$
        ignore    Type /help for more information
        lines     25

        # Kimi (kimi-cli 1.51): an "approval" panel "<Tool> is requesting approval to
        # <action>:" with "[1] Approve once", or a "question" panel; while it works, a
        # moon or a braille spinner with "Using <Tool>"; the input box "── input ──"
        # is there in every state, so it says idle only when nothing else matches.
        [kimi]
        waiting   is requesting approval to
        waiting   Type your answer, then press Enter to submit
        question  is requesting approval to
        limit     (Retrying after rate limit|Membership expired|LLM provider error)
        working   ^(🌑|🌒|🌓|🌔|🌕|🌖|🌗|🌘)
        working   Using [A-Za-z]+
        working   (Thinking|Compacting|Connecting to MCP servers)
        idle      ^── input ─
        lines     25

        # Hermes Agent 0.19 (its classic prompt): a box "Dangerous Command" with
        # "❯ 1. Allow once" and the prompt "⚠ ❯"; while it works the prompt is "⚕ ❯";
        # idle, a bare "❯"; its status line has running clocks.
        [hermes]
        waiting   ^⚠ ❯
        waiting   ❯ 1\. Allow once
        question  Dangerous Command
        limit     (Rate limited|usage is exhausted)
        working   ^⚕ ❯
        idle      ^❯$
        ignore    ^ ⚕ .*│
        ignore    to select, Enter to confirm
        lines     25
        """#
}
