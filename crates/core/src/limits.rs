//! The limits and defaults a caller sees, each defined once where it belongs, gathered here for the binding, which
//! hands them to the facade (the facade checks types and names and uses these values: it writes no number of its own).

pub use crate::config::{
    check_option, DEFAULT_FENCE_TTL, DEFAULT_MAX_STALL, DEFAULT_URL, MAX_COUNT, MAX_DURATION_MS, MAX_FENCE_TTL_MS,
    MAX_JITTER_MS, MAX_RETRIES, MIN_TTL_MS,
};
pub use crate::lead::campaign::DEFAULT_RETRY;
pub use crate::lock::contention::{CONTENTION_KEYS, DEFAULT_CONTENTION_LIMIT};
pub use crate::lock::locker::MAX_SET_KEYS;
pub use crate::lock::shared::{DEFAULT_MAX_RESULT_BYTES, DEFAULT_RESULT_TTL, DEFAULT_SHARED_WAIT};
pub use crate::schedule::fleet::{DEFAULT_HISTORY_LIMIT, DEFAULT_LIST_LIMIT};
pub use crate::schedule::options::{DEFAULT_JITTER, DEFAULT_STARTING_DEADLINE};
pub use snatch_protocol::attempt::Concurrency;
pub use snatch_protocol::fleet::Health;
pub use snatch_protocol::keys::MAX_KEY_BYTES;
pub use snatch_protocol::schedule::{Status, DEFAULT_HISTORY, MAX_HISTORY};
