import AgentSessions
import Testing

/// The answers a question offers, read off the screen as the agents draw them.
@Suite("Agent question choices", .tags(.pure))
struct QuestionChoicesTests {
    @Test func aNumberedMenuIsAnsweredByItsDigits() {
        // Claude Code's approval dialog, in its box
        let claude = """
            ╭──────────────────────────────────────────────╮
            │ Bash command                                 │
            │   rm -rf build                               │
            │ Do you want to proceed?                      │
            │ ❯ 1. Yes                                     │
            │   2. Yes, and don't ask again for rm commands │
            │   3. No, and tell Claude what to do differently (esc) │
            ╰──────────────────────────────────────────────╯
            """
        let choices = AgentAnswerChoice.offered(question: "Do you want to proceed?", screen: claude)
        #expect(choices.map(\.label) == ["Yes", "Yes, and don't ask again for rm commands",
                                         "No, and tell Claude what to do differently (esc)"])
        #expect(choices.map(\.keys) == ["1", "2", "3"] && choices.allSatisfy { !$0.enter })
        // Codex's, without a box, "1)" style
        let codex = "Allow command?\n> 1) Yes\n  2) No, provide feedback\n"
        #expect(AgentAnswerChoice.offered(question: "Allow command?", screen: codex).map(\.label) == ["Yes", "No, provide feedback"])
    }

    @Test func aYesNoPromptIsAnsweredByALine() {
        let choices = AgentAnswerChoice.offered(question: "got: Continue? (y/n)", screen: "READY> x\ngot: Continue? (y/n)\nREADY> ")
        #expect(choices == [AgentAnswerChoice(label: "Yes", keys: "y", enter: true), AgentAnswerChoice(label: "No", keys: "n", enter: true)])
        #expect(AgentAnswerChoice.offered(question: "Proceed? [Y/n]", screen: "Proceed? [Y/n]").count == 2)
    }

    @Test func nothingIsGuessedWhereTheScreenOffersNoAnswer() {
        #expect(AgentAnswerChoice.offered(question: "What next?", screen: "What next?\n> ").isEmpty)
        // numbers that are not a menu from 1 (a list in the agent's text) are not answers
        #expect(AgentAnswerChoice.offered(question: nil, screen: "Steps:\n2. build\n3. test\n").isEmpty)
        #expect(AgentAnswerChoice.offered(question: nil, screen: "1. only one\n").isEmpty)
    }

    @Test func theQuestionsKeyChangesWhenTheScreenMovesOn() {
        let asked = "READY> x\ngot: Continue? (y/n)\nREADY> "
        let q = "got: Continue? (y/n)"
        let key = AgentAnswerChoice.questionKey(question: q, screen: asked)
        #expect(AgentAnswerChoice.questionKey(question: q, screen: asked + "   \n\n") == key, "trailing blanks do not count")
        #expect(AgentAnswerChoice.questionKey(question: q, screen: "older\n" + asked) == key, "lines above do not count")
        // answered: the same words still in view, the screen after them changed
        #expect(AgentAnswerChoice.questionKey(question: q, screen: asked + "y\ngot: y\nREADY> ") != key)
    }
}
