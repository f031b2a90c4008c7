//! The errors of the lock core, one variant per distinct outcome a caller must tell apart.

use std::fmt;

/// Which kind of bad input an [`SnatchError::InvalidArg`] is, mirroring JavaScript's TypeError / RangeError.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// The value has the wrong shape (an empty key, an unparsable URL).
    Type,
    /// The value is of the right shape but out of range (a zero ttl, a key over 64 KiB).
    Range,
}

/// Everything that can go wrong in the lock core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnatchError {
    /// Bad input from the caller.
    InvalidArg { kind: ArgKind, message: String },
    /// A Redis server could not be reached or a command failed; `cause` says which server, and what happened (the
    /// whole message).
    Redis { cause: String },
    /// Redlock could not get a majority of the nodes within the validity window; one line per failed node, or the
    /// reason when none failed.
    Quorum { failures: Vec<String> },
    /// `wait` elapsed without getting the lock.
    Timeout { key: String, waited_ms: u64 },
    /// The locker was closed.
    Closed,
    /// No live replica registered the schedule (`trigger`).
    NoReplica { schedule: String },
    /// A waiting call on `key`, which its calling context holds already: it would wait for itself
    /// (run.rs, `reentry`). `mixed`: a set of keys (`reentrant`) that holds some of its keys and not others.
    Reentrant { key: String, mixed: bool },
}

impl SnatchError {
    /// The stable error code users match on (docs/locks.md, "Errors").
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArg { .. } => "ERR_SNATCH_INVALID_ARG",
            Self::Redis { .. } => "ERR_SNATCH_REDIS",
            Self::Quorum { .. } => "ERR_SNATCH_QUORUM",
            Self::Timeout { .. } => "ERR_SNATCH_TIMEOUT",
            Self::Closed => "ERR_SNATCH_CLOSED",
            Self::NoReplica { .. } => "ERR_SNATCH_NO_REPLICA",
            Self::Reentrant { .. } => "ERR_SNATCH_REENTRANT",
        }
    }

    /// A TypeError-kind invalid argument.
    pub fn type_arg(message: impl Into<String>) -> Self {
        Self::InvalidArg { kind: ArgKind::Type, message: message.into() }
    }

    /// A RangeError-kind invalid argument.
    pub fn range_arg(message: impl Into<String>) -> Self {
        Self::InvalidArg { kind: ArgKind::Range, message: message.into() }
    }
}

impl fmt::Display for SnatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArg { message, .. } => f.write_str(message),
            Self::Redis { cause } => f.write_str(cause),
            Self::Quorum { failures } => write!(
                f,
                "could not lock a majority of the Redis nodes within the validity window ({})",
                failures.join("; ")
            ),
            Self::Timeout { key, waited_ms } => {
                write!(f, "could not acquire lock '{key}' within {waited_ms} ms")
            }
            Self::Closed => f.write_str("the locker was closed"),
            Self::NoReplica { schedule } => write!(f, "no live replica has registered schedule '{schedule}'"),
            Self::Reentrant { key, mixed: false } => write!(
                f,
                "the lock '{key}' is held by the calling context already (this call runs inside the fn that holds it): \
                 waiting for it would wait for itself; pass reentrant: true to run under the held lock"
            ),
            Self::Reentrant { key, mixed: true } => write!(
                f,
                "the set of locks names '{key}', held by the calling context already, beside keys it does not hold: \
                 taking those while holding '{key}' out of order could deadlock"
            ),
        }
    }
}

impl std::error::Error for SnatchError {}
