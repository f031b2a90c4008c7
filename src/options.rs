//! Options as the facade passes them, converted to the core's types. The facade has checked the JS types; the
//! numbers are checked here.

use napi_derive::napi;
use snatch_core::{LockOptions, LockerConfig, SnatchError};
use std::time::Duration;

/// Options of a locker (`url` already folded into `urls`, `REDIS_URL` applied by the facade).
#[napi(object)]
pub struct LockerInit {
    pub urls: Vec<String>,
    pub prefix: Option<String>,
    pub ttl: Option<f64>,
    pub command_timeout: Option<f64>,
    pub drift_factor: Option<f64>,
}

/// Options of one acquisition, as the user gave them. The facade passes none when the user gave none, saving the
/// object and its property reads on the hot path; [`lock_options`] applies the defaults.
#[napi(object)]
pub struct LockInit {
    pub ttl: Option<f64>,
    pub auto_extend: Option<bool>,
    pub min_hold: Option<f64>,
    pub wait: Option<f64>,
}

impl TryFrom<LockerInit> for LockerConfig {
    type Error = SnatchError;

    fn try_from(o: LockerInit) -> Result<Self, SnatchError> {
        let defaults = LockerConfig::default();
        Ok(LockerConfig {
            urls: o.urls,
            prefix: o.prefix.unwrap_or(defaults.prefix),
            ttl: millis_or("ttl", o.ttl, defaults.ttl)?,
            command_timeout: millis_or("commandTimeout", o.command_timeout, defaults.command_timeout)?,
            drift_factor: o.drift_factor.unwrap_or(defaults.drift_factor),
        })
    }
}

/// The options of one acquisition: `init` checked and converted, with the defaults for what it leaves out;
/// `auto_extend` is the method's default for renewing the lease (true for runs, false for locks).
pub(crate) fn lock_options(init: Option<LockInit>, auto_extend: bool) -> Result<LockOptions, SnatchError> {
    let Some(o) = init else {
        return Ok(LockOptions { ttl: None, auto_extend, min_hold: Duration::ZERO, wait: Duration::ZERO });
    };
    Ok(LockOptions {
        ttl: o.ttl.map(|v| millis("ttl", v)).transpose()?,
        auto_extend: o.auto_extend.unwrap_or(auto_extend),
        min_hold: millis_or("minHold", o.min_hold, Duration::ZERO)?,
        wait: millis_or("wait", o.wait, Duration::ZERO)?,
    })
}

/// `value` milliseconds, which must be a non-negative integer (the core checks the bounds).
pub(crate) fn millis(name: &str, value: f64) -> Result<Duration, SnatchError> {
    if !value.is_finite() || value.fract() != 0.0 || value < 0.0 {
        return Err(SnatchError::range_arg(format!(
            "{name} must be a non-negative integer number of milliseconds, got {value}"
        )));
    }
    Ok(Duration::from_millis(value as u64))
}

fn millis_or(name: &str, value: Option<f64>, default: Duration) -> Result<Duration, SnatchError> {
    value.map_or(Ok(default), |v| millis(name, v))
}

/// Options of a schedule (the facade has applied the test-only clock offset from the environment).
#[napi(object)]
pub struct ScheduleInit {
    pub ttl: Option<f64>,
    /// IANA zone; default UTC.
    pub timezone: Option<String>,
    /// Test only: milliseconds added to this process's clock when deciding when occurrences are due.
    pub clock_offset: Option<f64>,
}

impl TryFrom<ScheduleInit> for snatch_core::ScheduleOptions {
    type Error = SnatchError;

    fn try_from(o: ScheduleInit) -> Result<Self, SnatchError> {
        Ok(snatch_core::ScheduleOptions {
            ttl: o.ttl.map(|v| millis("ttl", v)).transpose()?,
            clock_offset_ms: o.clock_offset.unwrap_or(0.0) as i64,
        })
    }
}
