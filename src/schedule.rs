//! `NativeSchedule`: a core schedule, which the facade's `ScheduledTask` wraps. Its occurrences' fns run through the
//! locker's runner, as every run does; their calls and the schedule's events reach the facade with the locker's
//! other outcomes (delivery.rs).

use napi_derive::napi;
use snatch_core::Schedule;

/// A running schedule.
#[napi]
pub struct NativeSchedule {
    schedule: Schedule,
}

impl NativeSchedule {
    pub(crate) fn new(schedule: Schedule) -> Self {
        Self { schedule }
    }
}

#[napi]
impl NativeSchedule {
    /// No new occurrences; resolves once a running fn has settled and its locks are given back.
    #[napi]
    pub async fn stop(&self) {
        self.schedule.stop().await;
    }
}
