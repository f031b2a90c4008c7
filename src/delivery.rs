//! What the facade hears: the runner's outcomes (snatch-protocol's `Outcome`, the one outcome type), each mapped to
//! JS here, once, as the arguments of the facade's `deliver(kind, id, fence, extra)`. Called on the JS thread, from a
//! socket's loop callback, the inbox's or a call from JS, the way node calls JS from I/O (ffi's `Caller`).

use crate::errors::NativeError;
use crate::ffi::napi::{Arg, Caller};
use napi::bindgen_prelude::{BigInt, Buffer, Either9, FnArgs, FunctionRef};
use napi::Env;
use napi_derive::napi;
use snatch_core::protocol::attempt::{AbortReason, SkipReason};
use snatch_core::protocol::run::Outcome;
use snatch_core::Told;

/// The facade's delivery function, `(kind, id, fence?, extra?)`, typed for binding.d.ts; [`arguments`] makes its
/// arguments.
pub(crate) type Deliver = FunctionRef<DeliverArgs, ()>;

/// The arguments of the facade's delivery function.
pub(crate) type DeliverArgs = FnArgs<(OutcomeKind, u32, Option<BigInt>, Option<Extra>)>;

/// The `extra` of an outcome (see [`OutcomeKind`]).
pub(crate) type Extra =
    Either9<bool, String, OccurrenceArgs, HeldArgs, NativeError, SkippedArgs, UnclaimedArgs, AttemptedArgs, StoredArgs>;

/// The `kind` of `deliver(kind, id, fence, extra)`, with what `fence` and `extra` then are; the facade reads the
/// values from the binding (`OutcomeKind` of binding.js), so that both sides share one definition.
#[napi]
#[derive(Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// Call the fn of run `id` under `fence`; `extra`: the schedule's [`OccurrenceArgs`], for an occurrence.
    Call = 0,
    /// The lease of run or lock `id` was lost.
    Lost = 1,
    /// Run `id` ended after its fn ran under `fence`; `extra`: its lease lapsed.
    Ran = 2,
    /// Run or acquisition `id` ended without the lock.
    NotAcquired = 3,
    /// Acquisition `id` got the lock, with `fence`; `extra`: its token.
    Locked = 4,
    /// Operation `id` answered `extra` (a boolean).
    Done = 5,
    /// Inspection `id`: the key is held, with `fence`, `extra` its [`HeldArgs`]; free without them.
    Inspected = 6,
    /// Run, acquisition or operation `id` failed: `extra` is the [`NativeError`].
    Failed = 7,
    /// Schedule `id` did not run an occurrence here: `extra` is its [`SkippedArgs`].
    Skipped = 8,
    /// Schedule `id` could not claim an occurrence: `extra` is its [`UnclaimedArgs`].
    Unclaimed = 9,
    /// The signal of run `id`'s fn aborts: `extra` says why, `timeout` or `replaced`.
    Aborted = 10,
    /// Operation `id`, a question to the fleet, answered `extra`, JSON.
    Answered = 11,
    /// Run `id`, a schedule's attempt, ended after its fn ran under `fence`, as `extra` ([`AttemptedArgs`]) says:
    /// recorded, its locks given back.
    Attempted = 12,
    /// Schedule `id` recorded an occurrence missed: `extra` is its [`SkippedArgs`] (the reason: `deadline`,
    /// `superseded`, `overlap` or `suspended`).
    Missed = 13,
    /// Turn `id` at a shared result found it stored: `extra` is its [`StoredArgs`].
    Stored = 14,
}

/// `extra` of [`OutcomeKind::Stored`].
#[napi(object)]
pub struct StoredArgs {
    /// The runner's error rather than its value.
    pub error: bool,
    /// The facade's bytes.
    pub bytes: Buffer,
}

/// `extra` of [`OutcomeKind::Attempted`].
#[napi(object)]
pub struct AttemptedArgs {
    /// How it ended: `ok`, `failed`, `timeout`, `replaced` or `lost` (decided once, as its record says).
    pub ending: String,
    /// From fn's call to its settling, in ms.
    pub duration_ms: f64,
}

/// `extra` of an occurrence's [`OutcomeKind::Call`].
#[napi(object)]
pub struct OccurrenceArgs {
    /// The schedule, by the facade's id for it.
    pub schedule: u32,
    /// The occurrence, in epoch milliseconds: its cron tick, or when a manual run was asked for.
    pub tick: f64,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Why it runs: `on-time`, `late`, `retry` or `manual`.
    pub why: String,
}

/// `extra` of a held key's [`OutcomeKind::Inspected`].
#[napi(object)]
pub struct HeldArgs {
    /// Its lease left, in ms.
    pub ttl: f64,
    /// How many hold it.
    pub holders: u32,
    /// The holder's instance id, when its value says.
    pub holder: Option<String>,
}

/// `extra` of [`OutcomeKind::Skipped`] and [`OutcomeKind::Missed`].
#[napi(object)]
pub struct SkippedArgs {
    pub tick: f64,
    /// Skipped: `taken`, `overlap` or `suspended`; missed: `deadline`, `superseded`, `overlap` or `suspended`.
    pub reason: String,
}

/// `extra` of [`OutcomeKind::Unclaimed`].
#[napi(object)]
pub struct UnclaimedArgs {
    pub tick: f64,
    pub error: NativeError,
}

/// `outcome` of `id` as `deliver`'s arguments: the one mapping of outcomes to JS.
fn arguments(id: u32, outcome: Outcome) -> [Arg; 4] {
    let (kind, fence, extra) = match outcome {
        Outcome::Call { fence, occurrence } => {
            let occurrence = occurrence.map(|o| {
                Arg::of(OccurrenceArgs {
                    schedule: o.schedule,
                    tick: o.attempt.tick as f64,
                    attempt: o.attempt.attempt,
                    why: o.why.as_str().to_owned(),
                })
            });
            (OutcomeKind::Call, Some(fence), occurrence)
        }
        Outcome::Lost { stalled } => (OutcomeKind::Lost, None, stalled.then(|| Arg::Text("stalled".to_owned()))),
        Outcome::Aborted { reason } => {
            let reason = match reason {
                AbortReason::Timeout => "timeout",
                AbortReason::Replaced => "replaced",
                AbortReason::Shutdown => "shutdown",
            };
            (OutcomeKind::Aborted, None, Some(Arg::Text(reason.to_owned())))
        }
        Outcome::Answered(json) => (OutcomeKind::Answered, None, Some(Arg::Text(json))),
        Outcome::Stored { error, bytes } => {
            (OutcomeKind::Stored, None, Some(Arg::of(StoredArgs { error, bytes: bytes.into() })))
        }
        Outcome::Ran { fence, lost } => (OutcomeKind::Ran, Some(fence), Some(Arg::Bool(lost))),
        Outcome::Attempted(ended) => {
            let args = AttemptedArgs {
                ending: ended.ending.as_str().to_owned(),
                duration_ms: ended.duration.as_secs_f64() * 1000.0,
            };
            (OutcomeKind::Attempted, Some(ended.fence), Some(Arg::of(args)))
        }
        Outcome::NotAcquired => (OutcomeKind::NotAcquired, None, None),
        Outcome::Locked { fence, token } => (OutcomeKind::Locked, Some(fence), Some(Arg::Text(token))),
        Outcome::Done(answer) => (OutcomeKind::Done, None, Some(Arg::Bool(answer))),
        Outcome::Inspected(None) => (OutcomeKind::Inspected, None, None),
        Outcome::Inspected(Some(held)) => {
            let args = HeldArgs { ttl: held.ttl_ms as f64, holders: held.holders, holder: held.holder };
            (OutcomeKind::Inspected, Some(held.fence), Some(Arg::of(args)))
        }
        Outcome::Failed(e) => (OutcomeKind::Failed, None, Some(Arg::of(NativeError::from(&e)))),
        Outcome::Skipped { tick, reason } => {
            let reason = match reason {
                SkipReason::Taken => "taken",
                SkipReason::Overlap => "overlap",
                SkipReason::Suspended => "suspended",
            };
            let args = SkippedArgs { tick: tick as f64, reason: reason.to_owned() };
            (OutcomeKind::Skipped, None, Some(Arg::of(args)))
        }
        Outcome::Missed { tick, reason } => {
            (OutcomeKind::Missed, None, Some(Arg::of(SkippedArgs { tick: tick as f64, reason })))
        }
        Outcome::Unclaimed { tick, error } => {
            let args = UnclaimedArgs { tick: tick as f64, error: (&error).into() };
            (OutcomeKind::Unclaimed, None, Some(Arg::of(args)))
        }
    };
    [Arg::Uint(kind as u32), Arg::Uint(id), fence.map_or(Arg::Undefined, Arg::BigInt), extra.unwrap_or(Arg::Undefined)]
}

/// Calls the facade's `deliver` for outcomes, on the JS thread of one environment.
pub(crate) struct Delivery {
    deliver: Deliver,
    caller: Caller,
}

impl Delivery {
    /// Delivers to `deliver` on the JS thread of `env`.
    pub(crate) fn new(env: &Env, deliver: Deliver) -> napi::Result<Self> {
        Ok(Self { deliver, caller: Caller::new(env, c"redis-snatch")? })
    }

    /// Hands the outcomes of `told` to the facade (nothing when empty), on the JS thread, leaving it empty. An
    /// exception the facade throws is reported as uncaught, as for a callback from node itself.
    pub(crate) fn deliver(&self, told: &mut Told) {
        self.caller.call_each(&self.deliver, told.drain(..).map(|(id, outcome)| arguments(id, outcome)));
    }
}
