//! What a schedule is given: its cron expression in a time zone, and its options with their defaults and ranges.

use crate::config::{validate_duration, MAX_RETRIES};
use crate::schedule::cron::CronSchedule;
use chrono::DateTime;
use snatch_protocol::attempt::Concurrency;
use snatch_protocol::schedule::{DEFAULT_HISTORY, MAX_HISTORY};
use snatch_protocol::schedule_loop::Ticks;
use snatch_protocol::SnatchError;
use std::time::Duration;

/// The default `startingDeadline`: a deploy or a failover at a tick delays the run, and does not lose it.
pub const DEFAULT_STARTING_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// The default `jitter`: none, each occurrence starts at its tick.
pub const DEFAULT_JITTER: Duration = Duration::ZERO;

/// Options of a schedule.
#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    /// Lease of each attempt (renewed while the fn runs); `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Test only: added to this process's wall clock when deciding when occurrences are due, to simulate replicas
    /// with skewed clocks.
    pub clock_offset_ms: i64,
    /// An occurrence no replica ran at its tick runs late if it can start within this of its tick; zero: never.
    pub starting_deadline: Duration,
    /// Further attempts after fn failed.
    pub retries: u32,
    /// Delay before the first retry, doubled for each next one, with jitter.
    pub retry_delay: Duration,
    pub concurrency: Concurrency,
    /// Per attempt: fn's signal aborts then, and the attempt counts as failed.
    pub timeout: Option<Duration>,
    /// An attempt running longer makes the schedule's health `stuck` (it is not aborted).
    pub max_runtime: Option<Duration>,
    /// How many records Redis keeps.
    pub history: u32,
    /// Each occurrence starts at its tick plus an offset below this, the same on every replica (zero: at its tick).
    pub jitter: Duration,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        Self {
            ttl: None,
            clock_offset_ms: 0,
            starting_deadline: DEFAULT_STARTING_DEADLINE,
            retries: 0,
            retry_delay: Duration::from_secs(1),
            concurrency: Concurrency::Forbid,
            timeout: None,
            max_runtime: None,
            history: DEFAULT_HISTORY,
            jitter: DEFAULT_JITTER,
        }
    }
}

impl ScheduleOptions {
    /// Checks the options a caller gave.
    pub fn validate(&self) -> Result<(), SnatchError> {
        if self.history == 0 || self.history > MAX_HISTORY {
            return Err(SnatchError::range_arg(format!("history must be from 1 to {MAX_HISTORY}")));
        }
        if self.retries > MAX_RETRIES {
            return Err(SnatchError::range_arg(format!("retries must be from 0 to {MAX_RETRIES}")));
        }
        if let Some(timeout) = self.timeout {
            validate_duration("timeout", timeout)?;
        }
        if let Some(max_runtime) = self.max_runtime {
            validate_duration("maxRuntime", max_runtime)?;
        }
        validate_duration("retryDelay", self.retry_delay)?;
        validate_duration("jitter", self.jitter)?;
        validate_duration("startingDeadline", self.starting_deadline)
    }
}

/// A cron expression: parsed, and as written (for the records and `schedules()`).
#[derive(Debug, Clone)]
pub struct Cron {
    pub schedule: CronSchedule,
    pub expression: String,
    pub timezone: String,
}

impl Cron {
    /// Parses `expression` for the IANA zone `timezone`.
    pub fn new(expression: &str, timezone: &str) -> Result<Self, SnatchError> {
        let schedule = CronSchedule::new(expression, timezone, chrono::Utc::now())?;
        Ok(Self { schedule, expression: expression.to_owned(), timezone: timezone.to_owned() })
    }
}

impl Ticks for Cron {
    fn next_after(&self, after: i64) -> Option<i64> {
        let after = DateTime::from_timestamp_millis(after)?;
        self.schedule.next_after(after).map(|tick| tick.timestamp_millis())
    }

    fn previous_before(&self, before: i64) -> Option<i64> {
        let before = DateTime::from_timestamp_millis(before)?;
        self.schedule.previous_before(before).map(|tick| tick.timestamp_millis())
    }
}
