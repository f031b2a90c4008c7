//! The core's limits, defaults and names (snatch-core's limits.rs) as the facade gets them (`NativeLocker.limits()`),
//! which uses these rather than numbers of its own, and has the core check an option's number
//! (`NativeLocker.checkOption()`).

use crate::errors::throw;
use napi::Env;
use napi_derive::napi;
use snatch_core::limits::*;
use snatch_core::LockerConfig;
use std::time::Duration;

/// The limits, defaults and names the facade uses (ms for durations).
#[napi(object)]
pub struct Limits {
    /// The longest duration option.
    pub max_duration_ms: f64,
    /// The shortest lease.
    pub min_ttl_ms: f64,
    /// The longest `fenceTtl`.
    pub max_fence_ttl_ms: f64,
    /// The largest count option: a list's or a semaphore's `limit`, a size in bytes.
    pub max_count: f64,
    /// The longest key, in UTF-8 bytes.
    pub max_key_bytes: u32,
    /// The most keys of a set of locks.
    pub max_set_keys: u32,
    /// The greatest id the facade gives its runs, locks and operations (the core numbers its own runs above).
    pub max_caller_id: u32,
    /// The most records a schedule keeps, and `retries`.
    pub max_history: u32,
    pub max_retries: u32,
    /// A locker's defaults: its Redis (without `REDIS_URL`), `ttl`, `commandTimeout`, `maxStall`, `fenceTtl`.
    pub default_url: String,
    pub default_ttl_ms: f64,
    pub default_command_timeout_ms: f64,
    pub default_max_stall_ms: f64,
    pub default_fence_ttl_ms: f64,
    /// A campaign's `retry`.
    pub default_retry_ms: f64,
    /// The most keys `contention()` keeps, and how many it gives without a `limit`.
    pub contention_keys: u32,
    pub default_contention_limit: u32,
    /// A schedule's `startingDeadline` and `history`.
    pub default_starting_deadline_ms: f64,
    pub default_history: u32,
    /// How many records `history()` reads, and how many locks `locks()` lists, without a `limit`.
    pub default_history_limit: u32,
    pub default_list_limit: u32,
    /// shared()'s `resultTtl`, `wait` and `maxResultBytes`.
    pub default_result_ttl_ms: f64,
    pub default_shared_wait_ms: f64,
    pub default_max_result_bytes: u32,
    /// A schedule's `jitter`: its default and its longest.
    pub default_jitter_ms: f64,
    pub max_jitter_ms: f64,
    /// A schedule's `concurrency` values, the default first.
    pub concurrencies: Vec<String>,
    /// A schedule's healths, best first.
    pub healths: Vec<String>,
    /// How an attempt can end, as its record says.
    pub outcomes: Vec<String>,
}

/// Milliseconds of `d`, as a JS number.
fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

/// The core's limits, defaults and names.
pub(crate) fn limits() -> Limits {
    let locker = LockerConfig::default();
    Limits {
        max_duration_ms: MAX_DURATION_MS as f64,
        min_ttl_ms: MIN_TTL_MS as f64,
        max_fence_ttl_ms: MAX_FENCE_TTL_MS as f64,
        max_count: MAX_COUNT as f64,
        max_key_bytes: MAX_KEY_BYTES as u32,
        max_set_keys: MAX_SET_KEYS as u32,
        max_caller_id: snatch_core::protocol::run::DRIVER_IDS - 1,
        max_history: MAX_HISTORY,
        max_retries: MAX_RETRIES,
        default_url: DEFAULT_URL.to_owned(),
        default_ttl_ms: ms(locker.ttl),
        default_command_timeout_ms: ms(locker.command_timeout),
        default_max_stall_ms: ms(DEFAULT_MAX_STALL),
        default_fence_ttl_ms: ms(DEFAULT_FENCE_TTL),
        default_retry_ms: ms(DEFAULT_RETRY),
        contention_keys: CONTENTION_KEYS as u32,
        default_contention_limit: DEFAULT_CONTENTION_LIMIT as u32,
        default_starting_deadline_ms: ms(DEFAULT_STARTING_DEADLINE),
        default_history: DEFAULT_HISTORY,
        default_history_limit: DEFAULT_HISTORY_LIMIT,
        default_list_limit: DEFAULT_LIST_LIMIT,
        default_result_ttl_ms: ms(DEFAULT_RESULT_TTL),
        default_shared_wait_ms: ms(DEFAULT_SHARED_WAIT),
        default_max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        default_jitter_ms: ms(DEFAULT_JITTER),
        max_jitter_ms: MAX_JITTER_MS as f64,
        concurrencies: Concurrency::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
        healths: Health::ALL.iter().map(|h| h.as_str().to_owned()).collect(),
        outcomes: Status::ENDED.iter().map(|s| s.as_str().to_owned()).collect(),
    }
}

/// Checks option `name`'s number `value` (an integer in its range: ms for a duration, a count otherwise); throws the
/// coded RangeError when it is not.
pub(crate) fn check_option(env: &Env, name: &str, value: f64) -> napi::Result<()> {
    snatch_core::limits::check_option(name, value).map_err(|e| throw(env, e))
}
