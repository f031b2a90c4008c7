//! Core errors as JS sees them, typed: the facade turns each into an instance of its exported error class.
//!
//! A failed operation's completion (and a schedule's `error` event) carries a [`NativeError`]; a call that fails at
//! once [`throw`]s a JS Error whose `code` is the [`ErrorClass`] and whose `cause` says what Redis or the connection
//! said. Both shapes are in the generated binding.d.ts; lib/errors.js maps each class to its export.

use crate::ffi;
use napi::Env;
use napi_derive::napi;
use snatch_core::{ArgKind, SnatchError};

/// The exported JS error class the facade makes of a core error (lib/errors.js has one for each name).
#[napi(string_enum)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names, reason = "each variant is named as the JS class it stands for")]
pub enum ErrorClass {
    TypeError,
    RangeError,
    RedisError,
    QuorumError,
    LockTimeoutError,
    ClosedError,
    NoReplicaError,
    ReentrantError,
}

impl ErrorClass {
    /// The class the facade builds for `e`.
    fn of(e: &SnatchError) -> Self {
        match e {
            SnatchError::InvalidArg { kind: ArgKind::Type, .. } => Self::TypeError,
            SnatchError::InvalidArg { kind: ArgKind::Range, .. } => Self::RangeError,
            SnatchError::Redis { .. } => Self::RedisError,
            SnatchError::Quorum { .. } => Self::QuorumError,
            SnatchError::Timeout { .. } => Self::LockTimeoutError,
            SnatchError::Closed => Self::ClosedError,
            SnatchError::NoReplica { .. } => Self::NoReplicaError,
            SnatchError::Reentrant { .. } => Self::ReentrantError,
        }
    }
}

/// The name JS sees: the variant's, as `#[napi(string_enum)]` gives it.
impl AsRef<str> for ErrorClass {
    fn as_ref(&self) -> &str {
        match self {
            Self::TypeError => "TypeError",
            Self::RangeError => "RangeError",
            Self::RedisError => "RedisError",
            Self::QuorumError => "QuorumError",
            Self::LockTimeoutError => "LockTimeoutError",
            Self::ClosedError => "ClosedError",
            Self::NoReplicaError => "NoReplicaError",
            Self::ReentrantError => "ReentrantError",
        }
    }
}

/// A core error in a completion or event.
#[napi(object)]
pub struct NativeError {
    /// Which exported class the facade builds.
    pub class: ErrorClass,
    pub message: String,
    /// RedisError: what Redis or the connection said.
    pub cause: Option<String>,
    /// ReentrantError: the key its calling context holds.
    pub key: Option<String>,
}

impl From<&SnatchError> for NativeError {
    fn from(e: &SnatchError) -> Self {
        let cause = match e {
            SnatchError::Redis { cause } => Some(cause.clone()),
            _ => None,
        };
        let key = match e {
            SnatchError::Reentrant { key, .. } => Some(key.clone()),
            _ => None,
        };
        Self { class: ErrorClass::of(e), message: e.to_string(), cause, key }
    }
}

/// `e` as a JS Error whose `code` is its [`ErrorClass`] and whose `cause` says what Redis or the connection said.
pub(crate) fn js_error(e: SnatchError) -> napi::Error<ErrorClass> {
    let NativeError { class, message, cause, .. } = NativeError::from(&e);
    let mut error = napi::Error::new(class, message);
    if let Some(cause) = cause {
        error.set_cause(napi::Error::from_reason(cause));
    }
    error
}

/// Throws `e` in `env` ([`js_error`]); returns what the call then fails with, which leaves that exception standing.
pub(crate) fn throw(env: &Env, e: SnatchError) -> napi::Error {
    ffi::napi::throw(env, js_error(e))
}
