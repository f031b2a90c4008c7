//! Core errors as rejected promises.
//!
//! The facade turns each into an instance of its exported error class. What it reads is the reason, a JSON object
//! `{"code", "class", "message", "cause"?}` (for example `{"code":"ERR_SNATCH_REDIS","class":"RedisError",…}`).

use snatch_core::{ArgKind, SnatchError};

/// The JS error class the facade builds for `e`.
fn class_of(e: &SnatchError) -> &'static str {
    match e {
        SnatchError::InvalidArg { kind: ArgKind::Type, .. } => "TypeError",
        SnatchError::InvalidArg { kind: ArgKind::Range, .. } => "RangeError",
        SnatchError::Redis { .. } => "RedisError",
        SnatchError::Quorum { .. } => "QuorumError",
        SnatchError::Timeout { .. } => "LockTimeoutError",
        SnatchError::Closed => "ClosedError",
    }
}

/// The JSON reason the facade reads for `e`.
pub(crate) fn reason(e: &SnatchError) -> String {
    let mut reason = serde_json::json!({ "code": e.code(), "class": class_of(e), "message": e.to_string() });
    if let SnatchError::Redis { cause } = e {
        reason["cause"] = cause.as_str().into();
    }
    reason.to_string()
}

/// Converts a core error for N-API.
pub(crate) fn to_napi(e: SnatchError) -> napi::Error {
    napi::Error::from_reason(reason(&e))
}
