//! Options of a locker and of one lock, with their defaults and validation.

use crate::SnatchError;
use std::time::Duration;

/// Longest duration accepted for any time option (ttl, wait, minHold, commandTimeout): 2^31 − 1 ms, as for timers.
pub const MAX_DURATION_MS: u64 = i32::MAX as u64;

/// How a [`crate::Locker`] reaches Redis and what it defaults to.
#[derive(Debug, Clone)]
pub struct LockerConfig {
    /// One URL for a single Redis, or an odd number >= 3 of independent masters (Redlock).
    pub urls: Vec<String>,
    /// Prefix of every key the locker writes.
    pub prefix: String,
    /// Default lease of a lock.
    pub ttl: Duration,
    /// Time one Redis command may take before it counts as failed.
    pub command_timeout: Duration,
    /// Redlock clock-drift factor: the validity of a lease is `ttl − elapsed − (ttl·drift_factor + 2 ms)`.
    pub drift_factor: f64,
}

impl Default for LockerConfig {
    fn default() -> Self {
        Self {
            urls: vec!["redis://127.0.0.1:6379".to_owned()],
            prefix: "snatch:".to_owned(),
            ttl: Duration::from_millis(30_000),
            command_timeout: Duration::from_millis(1_000),
            drift_factor: 0.01,
        }
    }
}

impl LockerConfig {
    /// Checks the values that the type alone does not constrain (URLs are checked when parsed).
    pub fn validate(&self) -> Result<(), SnatchError> {
        let n = self.urls.len();
        if n == 0 {
            return Err(SnatchError::type_arg("urls must name at least one Redis server"));
        }
        if n > 1 && (n < 3 || n.is_multiple_of(2)) {
            return Err(SnatchError::range_arg(format!(
                "urls must list an odd number (>= 3) of independent Redis masters, got {n}"
            )));
        }
        validate_duration("ttl", self.ttl, false)?;
        validate_duration("commandTimeout", self.command_timeout, false)?;
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(SnatchError::range_arg(format!("driftFactor must be in [0, 0.5), got {}", self.drift_factor)));
        }
        Ok(())
    }
}

/// Options of one acquisition.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Lease; `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Renew the lease every ttl/3 while held.
    pub auto_extend: bool,
    /// Keep the key at least this long after acquisition, even if released earlier.
    pub min_hold: Duration,
    /// How long to keep trying to get the lock; zero means one attempt.
    pub wait: Duration,
}

impl LockOptions {
    /// Checks the durations.
    pub fn validate(&self) -> Result<(), SnatchError> {
        if let Some(ttl) = self.ttl {
            validate_duration("ttl", ttl, false)?;
        }
        validate_duration("minHold", self.min_hold, true)?;
        validate_duration("wait", self.wait, true)?;
        Ok(())
    }
}

/// Rejects a duration over [`MAX_DURATION_MS`], or a zero one unless `zero_ok`.
pub fn validate_duration(name: &str, d: Duration, zero_ok: bool) -> Result<(), SnatchError> {
    let ms = d.as_millis();
    if (ms == 0 && !zero_ok) || ms > u128::from(MAX_DURATION_MS) {
        let low = if zero_ok { 0 } else { 1 };
        return Err(SnatchError::range_arg(format!(
            "{name} must be an integer number of milliseconds in [{low}, {MAX_DURATION_MS}], got {ms}"
        )));
    }
    Ok(())
}
