//! The error of the pure layer: a plan or builder refused its input. Both kinds carry one line and
//! an optional hint; the client layer maps them to its exit codes (usage → 2, other → 1).

/// What a builder or plan refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input as typed cannot work (a flag value, a missing variable): exit code 2.
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// Anything else the pure layer refuses (malformed certificates, no randomness, a plan that
    /// cannot finish): exit code 1.
    #[error("{message}")]
    Other {
        message: String,
        hint: Option<String>,
    },
}

/// A usage error with a hint: what is wrong with the input as typed, and what to type instead.
pub(crate) fn usage(message: impl Into<String>, hint: impl Into<String>) -> Error {
    Error::Usage {
        message: message.into(),
        hint: Some(hint.into()),
    }
}

impl Error {
    pub fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: None,
        }
    }
    /// The second line: what to do about it.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Error::Usage { hint, .. } | Error::Other { hint, .. } => hint.as_deref(),
        }
    }
    /// 2 for usage, 1 for anything else (the plugins' exit codes).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage { .. } => 2,
            Error::Other { .. } => 1,
        }
    }
    pub fn other(message: impl Into<String>) -> Error {
        Error::Other {
            message: message.into(),
            hint: None,
        }
    }
}
