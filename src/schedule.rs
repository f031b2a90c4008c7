//! `NativeSchedule`: a core schedule whose task is the facade's function and whose events go to its emitter.

use crate::errors::NativeError;
use napi::bindgen_prelude::{BigInt, FnArgs, Promise};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use snatch_core::chrono::{DateTime, Utc};
use snatch_core::{Lease, Schedule, SkipReason, TickEvent, TickHandler};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The facade's wrapper around the user's function, called with (tick in epoch ms, fence); its promise always
/// resolves (the outcome stays on the JS side).
pub(crate) type TickTask = ThreadsafeFunction<FnArgs<(f64, BigInt)>, Promise<()>, FnArgs<(f64, BigInt)>, Status, false>;

/// Receives the schedule's events. Strong: an active schedule keeps the process alive, as a timer would.
pub(crate) type TickSink = ThreadsafeFunction<ScheduleEvent, (), ScheduleEvent, Status, false>;

/// One event of a schedule, for the facade's emitter.
#[napi(object)]
pub struct ScheduleEvent {
    /// `run`, `skip`, `error` (claiming failed) or `lost` (the lease of a running task was lost).
    pub kind: String,
    /// The occurrence, in epoch milliseconds.
    pub tick: f64,
    pub fence: Option<BigInt>,
    pub duration_ms: Option<f64>,
    /// With `run`: the lease could not be guaranteed for the whole run.
    pub lost: Option<bool>,
    /// With `skip`: `taken` or `overlap`.
    pub reason: Option<String>,
    /// With `error`: what failed.
    pub error: Option<NativeError>,
}

impl ScheduleEvent {
    fn new(kind: &str, tick: DateTime<Utc>) -> Self {
        Self {
            kind: kind.to_owned(),
            tick: tick.timestamp_millis() as f64,
            fence: None,
            duration_ms: None,
            lost: None,
            reason: None,
            error: None,
        }
    }
}

/// The handler the core drives: calls the JS task and forwards events.
pub(crate) struct JsTickHandler {
    pub(crate) task: Arc<TickTask>,
    pub(crate) sink: Arc<TickSink>,
}

impl TickHandler for JsTickHandler {
    fn run(&self, tick: DateTime<Utc>, lease: Arc<Lease>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let (task, sink) = (self.task.clone(), self.sink.clone());
        Box::pin(async move {
            let args = FnArgs::from((tick.timestamp_millis() as f64, BigInt::from(lease.fence())));
            let settled = async move {
                if let Ok(promise) = task.call_async_catch(args).await {
                    let _ = promise.await;
                }
            };
            // Waits for the task, telling the schedule's listeners if the lease is lost meanwhile.
            tokio::pin!(settled);
            tokio::select! {
                () = &mut settled => return,
                lost = lease.ended() => if lost {
                    sink.call(ScheduleEvent::new("lost", tick), ThreadsafeFunctionCallMode::NonBlocking);
                },
            }
            settled.await
        })
    }

    fn event(&self, event: TickEvent) {
        let event = match event {
            TickEvent::Skip { tick, reason } => ScheduleEvent {
                reason: Some(
                    match reason {
                        SkipReason::Taken => "taken",
                        SkipReason::Overlap => "overlap",
                    }
                    .to_owned(),
                ),
                ..ScheduleEvent::new("skip", tick)
            },
            TickEvent::Error { tick, error } => {
                ScheduleEvent { error: Some((&error).into()), ..ScheduleEvent::new("error", tick) }
            }
            TickEvent::Ran { tick, fence, lost, duration } => ScheduleEvent {
                fence: Some(BigInt::from(fence)),
                duration_ms: Some(duration.as_secs_f64() * 1000.0),
                lost: Some(lost),
                ..ScheduleEvent::new("run", tick)
            },
        };
        self.sink.call(event, ThreadsafeFunctionCallMode::NonBlocking);
    }
}

/// A running schedule; the facade's `ScheduledTask` wraps it.
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
    /// No new occurrences; resolves once a running task has settled.
    #[napi]
    pub async fn stop(&self) {
        self.schedule.stop().await;
    }
}
