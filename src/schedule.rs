//! `NativeSchedule`: a core schedule, which the facade's `ScheduledTask` wraps. Its occurrences' fns run through the
//! locker's runner, as every run does; their calls and the schedule's events reach the facade with the locker's
//! other outcomes (delivery.rs).

use napi_derive::napi;
use snatch_core::{Handler, Schedule};

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

/// A handler of stored schedules run on this replica (`locker.handle`), which the facade's handler wraps.
#[napi]
pub struct NativeHandler {
    handler: Handler,
}

impl NativeHandler {
    pub(crate) fn new(handler: Handler) -> Self {
        Self { handler }
    }
}

#[napi]
impl NativeHandler {
    /// No new occurrences here; resolves once the fns running here have settled and their locks are given back.
    #[napi]
    pub async fn stop(&self) {
        self.handler.stop().await;
    }
}
