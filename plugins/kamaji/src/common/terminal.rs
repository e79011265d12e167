//! Whether a person is there to answer: destructive verbs ask on a terminal and need `--yes`
//! without one.

/// Whether stdin is a terminal (to ask before destroying).
pub fn stdin_is_tty() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdin())
}
