//! What the facade hears: the runner's outcomes (snatch-protocol's `Outcome`, the one outcome type), each mapped to
//! JS here, once, as the arguments of the facade's `deliver(kind, id, fence, extra)`. Invoked on the JS thread, from a
//! socket's loop callback, the inbox's or a call from JS, the way node calls JS from I/O (ffi's `Caller`).

use crate::errors::NativeError;
use crate::ffi::napi::{Arg, Caller};
use napi::bindgen_prelude::{BigInt, Buffer, Either12, FnArgs, FunctionRef};
use napi::Env;
use napi_derive::napi;
use snatch_core::protocol::attempt::{AbortReason, SkipReason};
use snatch_core::protocol::run::{Invoked, Outcome};
use snatch_core::Told;

/// The facade's delivery function, `(kind, id, fence?, extra?)`, typed for binding.d.ts; [`arguments`] makes its
/// arguments.
pub(crate) type Deliver = FunctionRef<DeliverArgs, ()>;

/// The arguments of the facade's delivery function.
pub(crate) type DeliverArgs = FnArgs<(OutcomeKind, u32, Option<BigInt>, Option<Extra>)>;

/// The `extra` of an outcome (see [`OutcomeKind`]).
pub(crate) type Extra = Either12<
    bool,
    String,
    AttemptArgs,
    HeldArgs,
    NativeError,
    SkippedArgs,
    UnclaimedArgs,
    AttemptedArgs,
    StoredArgs,
    Vec<BigInt>,
    u32,
    LeaderArgs,
>;

/// The `kind` of `deliver(kind, id, fence, extra)`, with what `fence` and `extra` then are; the facade reads the
/// values from the binding (`OutcomeKind` of binding.js), so that both sides share one definition.
#[napi]
#[derive(Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// Call the fn of run `id` under `fence`; `extra`: for the caller's run under one lock none, or `true` when its lock
    /// was taken by a direct call; the fences of a set's keys (bigints, in order), a schedule's [`AttemptArgs`], or the
    /// id of the campaign whose term it is.
    Invoke = 0,
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
    /// Shared run `id` found the result stored (its fn not called): `extra` is its [`StoredArgs`].
    Stored = 14,
    /// Run `id`, a leader's term under `fence`, ended: `extra` says why, `returned`, `resigned`, `stopped`, `lost` or
    /// `error`.
    Revoked = 15,
    /// Campaign or observer `id` sees this leader: `extra` is its [`LeaderArgs`], none without a leader.
    Leader = 16,
    /// Campaign or observer `id` met an error, `extra` (a [`NativeError`]); it goes on.
    Erred = 17,
}

/// `extra` of [`OutcomeKind::Leader`].
#[napi(object)]
pub struct LeaderArgs {
    /// The leader's instance id, when its lock's value says.
    pub leader: Option<String>,
    /// Its term (the fence of its lock), when known.
    pub term: Option<BigInt>,
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

/// `extra` of an occurrence's [`OutcomeKind::Invoke`].
#[napi(object)]
pub struct AttemptArgs {
    /// The schedule, by the facade's id for it.
    pub schedule: u32,
    /// The occurrence, in epoch milliseconds: its cron tick, or when a manual run was asked for.
    pub tick: f64,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Why it runs: `on-time`, `late`, `retry` or `manual`.
    pub why: String,
    /// When it was due to start, in epoch milliseconds: its tick plus the schedule's jitter offset for it.
    pub due: f64,
    /// The stored schedule it is an occurrence of (`schedule` is then its handler's id), if it is one.
    pub id: Option<String>,
    /// That stored schedule's `data`, as JSON, if it has any.
    pub data: Option<String>,
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
        Outcome::Invoke { fence, invoked } => {
            let extra = match invoked {
                Invoked::Run { direct } => direct.then_some(Arg::Bool(true)),
                Invoked::Set(fences) => Some(Arg::of(fences.into_iter().map(BigInt::from).collect::<Vec<_>>())),
                Invoked::Attempt(scheduled) => Some(Arg::of(AttemptArgs {
                    schedule: scheduled.schedule,
                    tick: scheduled.attempt.tick as f64,
                    attempt: scheduled.attempt.attempt,
                    why: scheduled.why.as_str().to_owned(),
                    due: scheduled.due as f64,
                    id: scheduled.stored.as_ref().map(|run| run.id.clone()),
                    data: scheduled.stored.as_ref().and_then(|run| run.data.clone()),
                })),
                Invoked::Term(campaign) => Some(Arg::Uint(campaign)),
            };
            (OutcomeKind::Invoke, Some(fence), extra)
        }
        Outcome::Lost { stalled } => (OutcomeKind::Lost, None, stalled.then(|| Arg::Text("stalled".to_owned()))),
        Outcome::Aborted { reason } => {
            let reason = match reason {
                AbortReason::Timeout => "timeout",
                AbortReason::Replaced => "replaced",
                AbortReason::Shutdown => "shutdown",
                AbortReason::Resigned => "resigned",
                AbortReason::Stopped => "stopped",
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
        Outcome::Revoked { fence, reason } => {
            (OutcomeKind::Revoked, Some(fence), Some(Arg::Text(reason.as_str().to_owned())))
        }
        Outcome::Leader(leading) => {
            let args = leading.map(|(leader, term)| Arg::of(LeaderArgs { leader, term: term.map(BigInt::from) }));
            (OutcomeKind::Leader, None, args)
        }
        Outcome::Erred(e) => (OutcomeKind::Erred, None, Some(Arg::of(NativeError::from(&e)))),
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
