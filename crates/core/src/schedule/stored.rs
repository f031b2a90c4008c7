//! Stored schedules: schedules kept in Redis as data, created, changed and removed at runtime from any process, run
//! by the replicas that registered their handler (`handle`), each occurrence once across the fleet.
//!
//! A stored schedule is a code schedule's keys under its id (one namespace: snatch-protocol's schedule.rs), whose state
//! also holds its spec (compact JSON, [`StoredSpec`], in fields of at most 64 bytes, so that the state stays a
//! listpack), its version, the tick of its next occurrence and how many it dispatched. Its occurrences run as a code
//! schedule's do, through the same [`Driver`] and attempts (claim with a rising fence, record, run, retries, a dead
//! runner's attempt taken over). What differs is how a replica learns that one is due: not a loop per schedule (whose
//! heartbeats would cost Redis in proportion to the schedules), but a due index: per handler, one sorted set in each of
//! [`BUCKETS`] buckets (hash tags of their own, so a cluster spreads them), id → when it next needs a runner (its next
//! tick, or a look at its open attempts, or a manual run). A runner reads the head of each bucket when it starts, every
//! [`REFRESH`] and when woken (a schedule placed due within [`REFRESH`] publishes on the bucket's channel), sleeps
//! until the earliest, then takes the due ids in batches (each held for [`TAKE_HOLD`], due again should the taker die)
//! and visits each: its open attempts swept, its manual runs taken, its due occurrence run (on time, late within
//! `startingDeadline`, or recorded missed), its next tick written with the occurrence's first record, in one script
//! (so a dispatch that dies before is done again, and the occurrence's record keeps it to one run), and the id placed
//! again (the placings of a runner's visits in one call per bucket).

use crate::config::{validate_duration, LockOptions, MAX_RETRIES};
use crate::lock::job::Job;
use crate::lock::locker::Locker;
use crate::run::input::Post;
use crate::schedule::dispatch::{Advance, Dispatch};
use crate::schedule::options::{Cron, ScheduleOptions, DEFAULT_STARTING_DEADLINE};
use crate::schedule::scheduler::{Driver, Work};
use crate::schedule::store::{self, Control, Registration};
use crate::server::script_call::ScriptCall;
use chrono::Utc;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use snatch_protocol::attempt::{AbortReason, Concurrency, Next, Start};
use snatch_protocol::fleet::{Health, Observed};
use snatch_protocol::run::StoredRun;
use snatch_protocol::schedule::{
    Attempt, Jitter, Limits, Record, ScheduleKeys, Status, Why, Write, MAX_HISTORY, MAX_LOOK_BACK,
};
use snatch_protocol::schedule_loop::{Ticks, LOOK_SLACK};
use snatch_protocol::scripts::{
    CLUSTER, STORED_ADVANCE, STORED_COUNT, STORED_HEADS, STORED_LIST, STORED_PLACE, STORED_REMOVE, STORED_RUNNERS,
    STORED_STATE, STORED_TAKE, STORED_WRITE,
};
use snatch_protocol::stored::{
    bucket_of, runner, runners_key, BucketKeys, BUCKETS, DEFAULT_STORED_HISTORY, FINISHED_RETENTION, MAX_DATA_BYTES,
    MAX_HANDLER_BYTES, MAX_ID_BYTES,
};
use snatch_protocol::SnatchError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

/// How often a runner reads the head of every bucket of its handler's due index, woken or not.
pub const REFRESH: Duration = Duration::from_secs(60);

/// How often a runner renews its registration as a runner of its handler.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// How long a runner's registration lasts without being renewed.
const REGISTRATION: Duration = Duration::from_secs(15);

/// How many due schedules one take holds at most.
pub const BATCH: u32 = 100;

/// How long a take holds a schedule before it is due again (its taker died, or stopped, before placing it): another
/// runner that takes it meanwhile is kept from running its occurrence twice by the occurrence's claim and record.
const TAKE_HOLD: Duration = Duration::from_secs(5);

/// An occurrence dispatched within this of its tick runs on time; later, it runs late (within `startingDeadline`).
pub const ON_TIME_WITHIN: Duration = Duration::from_secs(10);

/// How many times an upsert reads again when another write came first.
const UPSERT_TRIES: u32 = 8;

/// How long a stored schedule's records are kept after its last write.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The public options of a spec, beside its schedule (`upsertSchedule`'s names).
const SPEC_FIELDS: [&str; 19] = [
    "cron",
    "every",
    "at",
    "timezone",
    "handler",
    "data",
    "startAt",
    "endAt",
    "limit",
    "ttl",
    "startingDeadline",
    "retries",
    "retryDelay",
    "concurrency",
    "timeout",
    "maxRuntime",
    "history",
    "jitter",
    "clockOffsetMs",
];

/// A stored schedule's spec as Redis keeps it: compact JSON, short names, what is not given left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredSpec {
    #[serde(rename = "h")]
    pub handler: String,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(rename = "z", default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// `data` as JSON text.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<i64>,
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<i64>,
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Where `every` counts from when no `startAt` is given: when the schedule was first stored.
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<i64>,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
    #[serde(rename = "sd", default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline: Option<u64>,
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    #[serde(rename = "rd", default, skip_serializing_if = "Option::is_none")]
    pub retry_delay: Option<u64>,
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<String>,
    #[serde(rename = "to", default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(rename = "mr", default, skip_serializing_if = "Option::is_none")]
    pub max_runtime: Option<u64>,
    #[serde(rename = "hi", default, skip_serializing_if = "Option::is_none")]
    pub history: Option<u32>,
    #[serde(rename = "j", default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<u64>,
    /// Test only: a replica's skewed clock (`ScheduleOptions::clock_offset_ms`).
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
}

impl StoredSpec {
    /// The spec `json` gives (`upsertSchedule`'s names, times in epoch ms), checked, `now` being the time of the
    /// upsert: exactly one of cron, every and at; `every` of 1000 ms or more; `at` not past its starting deadline;
    /// `data` within [`MAX_DATA_BYTES`]; no unknown option.
    pub fn parse(json: &str, now: i64) -> Result<Self, SnatchError> {
        let fields: Map<String, Value> =
            serde_json::from_str(json).map_err(|e| SnatchError::type_arg(format!("the spec is not an object: {e}")))?;
        if let Some(unknown) = fields.keys().find(|name| !SPEC_FIELDS.contains(&name.as_str())) {
            return Err(SnatchError::type_arg(format!(
                "unknown option '{unknown}' in the spec of a stored schedule (known: {})",
                SPEC_FIELDS[..18].join(", ")
            )));
        }
        let given = |name: &str| fields.get(name).filter(|v| !v.is_null());
        let text = |name: &str| -> Result<Option<String>, SnatchError> {
            given(name)
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| SnatchError::type_arg(format!("{name} must be a string")))
                })
                .transpose()
        };
        let int = |name: &str| -> Result<Option<i64>, SnatchError> {
            given(name)
                .map(|v| {
                    v.as_f64()
                        .filter(|n| n.is_finite() && n.fract() == 0.0 && n.abs() < 9e15)
                        .map(|n| n as i64)
                        .ok_or_else(|| SnatchError::type_arg(format!("{name} must be an integer (ms)")))
                })
                .transpose()
        };
        let count = |name: &str| -> Result<Option<u64>, SnatchError> {
            int(name)?
                .map(|n| u64::try_from(n).map_err(|_| SnatchError::range_arg(format!("{name} must not be negative"))))
                .transpose()
        };
        let handler = text("handler")?.ok_or_else(|| SnatchError::type_arg("a stored schedule needs a handler"))?;
        validate_handler(&handler)?;
        let data = match given("data") {
            None => None,
            Some(value) => {
                let json = value.to_string();
                if json.len() > MAX_DATA_BYTES {
                    return Err(SnatchError::range_arg(format!(
                        "data is {} bytes as JSON, over the {MAX_DATA_BYTES} bytes a stored schedule keeps",
                        json.len()
                    )));
                }
                Some(json)
            }
        };
        let small = |name: &str| -> Result<Option<u32>, SnatchError> {
            count(name)?
                .map(|n| u32::try_from(n).map_err(|_| SnatchError::range_arg(format!("{name} is too large"))))
                .transpose()
        };
        let spec = Self {
            handler,
            cron: text("cron")?,
            timezone: text("timezone")?,
            every: count("every")?,
            at: int("at")?,
            data,
            start_at: int("startAt")?,
            end_at: int("endAt")?,
            limit: count("limit")?,
            anchor: None,
            ttl: count("ttl")?,
            starting_deadline: count("startingDeadline")?,
            retries: small("retries")?,
            retry_delay: count("retryDelay")?,
            concurrency: text("concurrency")?,
            timeout: count("timeout")?,
            max_runtime: count("maxRuntime")?,
            history: small("history")?,
            jitter: count("jitter")?,
            clock_offset_ms: int("clockOffsetMs")?,
        };
        spec.validate(now)?;
        Ok(spec)
    }

    /// Checks what a spec says, at the time of an upsert `now`.
    fn validate(&self, now: i64) -> Result<(), SnatchError> {
        let kinds = [self.cron.is_some(), self.every.is_some(), self.at.is_some()].iter().filter(|&&k| k).count();
        if kinds != 1 {
            return Err(SnatchError::type_arg(format!(
                "a stored schedule needs exactly one of cron, every and at ({kinds} given)"
            )));
        }
        if self.every.is_some_and(|every| every < 1000) {
            return Err(SnatchError::range_arg("every must be 1000 ms or more"));
        }
        if self.timezone.is_some() && self.cron.is_none() {
            return Err(SnatchError::type_arg("timezone is for a cron schedule"));
        }
        if let (Some(start), Some(end)) = (self.start_at, self.end_at) {
            if end < start {
                return Err(SnatchError::range_arg("endAt must not be before startAt"));
            }
        }
        if self.limit == Some(0) {
            return Err(SnatchError::range_arg("limit must be 1 or more"));
        }
        let options = self.options()?;
        options.validate()?;
        LockOptions { ttl: options.ttl, auto_extend: true, ..LockOptions::default() }.validate()?;
        self.ticks()?;
        if let Some(at) = self.at {
            let deadline = options.starting_deadline.as_millis() as i64;
            if at < now - deadline {
                return Err(SnatchError::range_arg(format!(
                    "at is {} ms in the past, beyond the startingDeadline of {deadline} ms: it would never run",
                    now - at
                )));
            }
        }
        Ok(())
    }

    /// Its options, as a code schedule's (defaults but `history`, which is [`DEFAULT_STORED_HISTORY`]).
    pub fn options(&self) -> Result<ScheduleOptions, SnatchError> {
        let ms = |n: Option<u64>| n.map(Duration::from_millis);
        let concurrency = self.concurrency.as_deref().map_or(Ok(Concurrency::Forbid), Concurrency::parse)?;
        let defaults = ScheduleOptions::default();
        if self.history.is_some_and(|h| h == 0 || h > MAX_HISTORY) {
            return Err(SnatchError::range_arg(format!("history must be from 1 to {MAX_HISTORY}")));
        }
        if self.retries.is_some_and(|r| r > MAX_RETRIES) {
            return Err(SnatchError::range_arg(format!("retries must be from 0 to {MAX_RETRIES}")));
        }
        if let Some(every) = self.every {
            validate_duration("every", Duration::from_millis(every)).or_else(|e| {
                if every >= 1000 {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
        }
        Ok(ScheduleOptions {
            ttl: ms(self.ttl),
            clock_offset_ms: self.clock_offset_ms.unwrap_or(0),
            starting_deadline: ms(self.starting_deadline).unwrap_or(DEFAULT_STARTING_DEADLINE),
            retries: self.retries.unwrap_or(0),
            retry_delay: ms(self.retry_delay).unwrap_or(defaults.retry_delay),
            concurrency,
            timeout: ms(self.timeout),
            max_runtime: ms(self.max_runtime),
            history: self.history.unwrap_or(DEFAULT_STORED_HISTORY),
            jitter: ms(self.jitter).unwrap_or(defaults.jitter),
        })
    }

    /// When its occurrences are.
    pub fn ticks(&self) -> Result<StoredTicks, SnatchError> {
        let kind = match (&self.cron, self.every, self.at) {
            (Some(cron), _, _) => Kind::Cron(Box::new(Cron::new(cron, self.timezone.as_deref().unwrap_or("UTC"))?)),
            (_, Some(every), _) => {
                Kind::Every { anchor: self.start_at.or(self.anchor).unwrap_or(0), every: every as i64 }
            }
            (_, _, Some(at)) => Kind::At(at),
            _ => return Err(SnatchError::type_arg("a stored schedule needs exactly one of cron, every and at")),
        };
        Ok(StoredTicks { kind, start_at: self.start_at, end_at: self.end_at })
    }

    /// The spec as `getSchedule` tells it (the public names).
    fn public(&self) -> Map<String, Value> {
        let mut out = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            out.insert(name.to_owned(), value.unwrap_or(Value::Null));
        };
        put("handler", Some(Value::from(self.handler.clone())));
        put("cron", self.cron.clone().map(Value::from));
        put("every", self.every.map(Value::from));
        put("at", self.at.map(Value::from));
        put("timezone", Some(Value::from(self.timezone.clone().unwrap_or_else(|| "UTC".to_owned()))));
        put("data", self.data.as_deref().and_then(|d| serde_json::from_str(d).ok()));
        put("startAt", self.start_at.map(Value::from));
        put("endAt", self.end_at.map(Value::from));
        put("limit", self.limit.map(Value::from));
        out
    }
}

/// Checks a handler name: 1 to [`MAX_HANDLER_BYTES`] bytes, no newline.
pub fn validate_handler(name: &str) -> Result<(), SnatchError> {
    if name.is_empty() || name.len() > MAX_HANDLER_BYTES || name.contains('\n') {
        return Err(SnatchError::type_arg(format!(
            "a handler name must be 1 to {MAX_HANDLER_BYTES} bytes without a newline"
        )));
    }
    Ok(())
}

/// Checks a stored schedule id: 1 to [`MAX_ID_BYTES`] bytes, and a valid key.
fn validate_id(locker: &Locker, id: &str) -> Result<ScheduleKeys, SnatchError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(SnatchError::type_arg(format!("a stored schedule id must be 1 to {MAX_ID_BYTES} bytes")));
    }
    ScheduleKeys::new(&locker.config().prefix, id, locker.one_slot())
}

/// Stored schedules need one Redis (or a Cluster, or Sentinel): on Redlock they are refused.
fn supported(locker: &Locker) -> Result<(), SnatchError> {
    match locker.nodes().single() {
        Some(_) => Ok(()),
        None => Err(SnatchError::type_arg(
            "stored schedules need one Redis, a Redis Cluster or Sentinel: Redlock (urls) is not supported",
        )),
    }
}

/// A cron expression, a period or one time, within `startAt`..`endAt`.
#[derive(Debug, Clone)]
pub struct StoredTicks {
    kind: Kind,
    start_at: Option<i64>,
    end_at: Option<i64>,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron(Box<Cron>),
    Every { anchor: i64, every: i64 },
    At(i64),
}

impl StoredTicks {
    /// The tick of `kind` strictly after `after`, ignoring the bounds.
    fn bare_after(&self, after: i64) -> Option<i64> {
        match &self.kind {
            Kind::Cron(cron) => cron.next_after(after),
            Kind::Every { anchor, every } => {
                if after < *anchor {
                    Some(*anchor)
                } else {
                    Some(anchor + ((after - anchor) / every + 1) * every)
                }
            }
            Kind::At(at) => (*at > after).then_some(*at),
        }
    }
}

impl Ticks for StoredTicks {
    fn next_after(&self, after: i64) -> Option<i64> {
        let after = self.start_at.map_or(after, |start| after.max(start - 1));
        self.bare_after(after).filter(|&tick| self.end_at.is_none_or(|end| tick <= end))
    }

    fn previous_before(&self, before: i64) -> Option<i64> {
        let before = self.end_at.map_or(before, |end| before.min(end.saturating_add(1)));
        let tick = match &self.kind {
            Kind::Cron(cron) => cron.previous_before(before),
            Kind::Every { anchor, every } => (before > *anchor).then(|| anchor + (before - 1 - anchor) / every * every),
            Kind::At(at) => (*at < before).then_some(*at),
        }?;
        (self.start_at.is_none_or(|start| tick >= start)).then_some(tick)
    }
}

/// A stored schedule's state, as scripts/stored_state.lua reads it.
#[derive(Debug, Clone, Default)]
struct State {
    spec: Option<String>,
    version: Option<String>,
    next: Option<i64>,
    runs: u64,
    last: Option<i64>,
    done: Option<i64>,
    suspended: bool,
    /// A code schedule registered this name.
    code: bool,
    /// The server's time, in ms.
    now: i64,
    /// It may have open attempts (false only when a visit's read found none).
    open: bool,
    /// It may have manual runs asked for (false only when a visit's read found none).
    triggers: bool,
}

/// Reads the state of the schedule of `keys`; for a runner's `visit`, whether it has open attempts and manual runs too.
async fn read_state(locker: &Locker, keys: &ScheduleKeys, visit: bool) -> Result<State, SnatchError> {
    let mut call = ScriptCall::new(&STORED_STATE, if visit { 3 } else { 1 });
    call.arg(&keys.state);
    if visit {
        call.arg(&keys.open).arg(&keys.triggers);
    }
    let fields: Vec<Option<String>> = locker.nodes().first(call).await?;
    let field = |n: usize| fields.get(n).cloned().flatten();
    let number = |n: usize| field(n).and_then(|v| v.parse::<i64>().ok());
    Ok(State {
        spec: field(0),
        version: field(1),
        next: number(2),
        runs: number(3).and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
        last: number(5),
        done: number(6),
        suspended: field(7).is_some(),
        code: field(0).is_none() && field(8).is_some(),
        now: number(9).unwrap_or_else(|| Utc::now().timestamp_millis()),
        open: number(10) != Some(0),
        triggers: number(11) != Some(0),
    })
}

/// The cluster argument of the scripts that publish.
fn cluster(locker: &Locker) -> &'static str {
    if locker.one_slot() {
        CLUSTER
    } else {
        "0"
    }
}

/// How to place a schedule in its bucket's due index.
struct Place<'a> {
    id: &'a str,
    handler: &'a str,
    /// When it is next due; `None` takes it out.
    score: Option<i64>,
    /// The score it must still have.
    expect: Option<i64>,
    /// Another handler's index it leaves.
    leaves: Option<&'a str>,
    /// Only bring it forward.
    sooner: bool,
}

/// Places a schedule in its bucket's due index: true when placed (false: its score was not `expect`).
async fn place(locker: &Locker, place: Place<'_>) -> Result<bool, SnatchError> {
    let one = [(place.id, place.score, place.expect)];
    let placed = place_all(locker, bucket_of(place.id), place.handler, place.leaves, place.sooner, &one).await?;
    Ok(placed.first() == Some(&1))
}

/// Places schedules of `handler`, all in `bucket`, in its due index, each (id, score, expect) as [`Place`] says: 1
/// for each placed, 0 where its score was not `expect`.
async fn place_all(
    locker: &Locker,
    bucket: u32,
    handler: &str,
    leaves: Option<&str>,
    sooner: bool,
    schedules: &[(&str, Option<i64>, Option<i64>)],
) -> Result<Vec<i64>, SnatchError> {
    let bucket = BucketKeys::new(&locker.config().prefix, bucket);
    let mut call = ScriptCall::new(&STORED_PLACE, 2 + usize::from(leaves.is_some()));
    call.arg(bucket.handlers()).arg(bucket.due(handler));
    if let Some(leaves) = leaves {
        call.arg(bucket.due(leaves));
    }
    call.arg(handler).arg(bucket.wake()).arg(REFRESH.as_millis() as u64);
    call.arg(if sooner { "1" } else { "0" }).arg(cluster(locker));
    let ms = |ms: Option<i64>| ms.map_or_else(String::new, |ms| ms.to_string());
    for &(id, score, expect) in schedules {
        call.arg(id).arg(ms(score)).arg(ms(expect));
    }
    locker.nodes().first(call).await
}

/// A visit's schedule to place again, taken at score `held`: when it is next due (`None` takes it out), and who hears
/// whether it was placed.
struct Placing {
    id: String,
    score: Option<i64>,
    held: i64,
    placed: oneshot::Sender<bool>,
}

/// Places the schedules that a runner's visits hand it, those that come while a call is under way together, one call
/// per bucket for up to [`BATCH`] of them: when many are due at once, their visits end together.
async fn place_in_batches(locker: Locker, handler: String, mut placings: mpsc::UnboundedReceiver<Placing>) {
    let mut batch = Vec::new();
    while placings.recv_many(&mut batch, BATCH as usize).await > 0 {
        let mut by_bucket: HashMap<u32, Vec<Placing>> = HashMap::new();
        for placing in batch.drain(..) {
            by_bucket.entry(bucket_of(&placing.id)).or_default().push(placing);
        }
        join_all(by_bucket.into_iter().map(|(bucket, placings)| {
            let (locker, handler) = (&locker, &handler);
            async move {
                let schedules: Vec<_> = placings.iter().map(|p| (p.id.as_str(), p.score, Some(p.held))).collect();
                let placed = place_all(locker, bucket, handler, None, false, &schedules).await.unwrap_or_default();
                for (n, placing) in placings.into_iter().enumerate() {
                    let _ = placing.placed.send(placed.get(n) == Some(&1));
                }
            }
        }))
        .await;
    }
}

/// Creates or replaces stored schedule `id` from `spec_json` (`upsertSchedule`): its next occurrence follows the new
/// spec, fleet-wide. Its info, as JSON.
pub async fn upsert(locker: &Locker, id: &str, spec_json: &str) -> Result<String, SnatchError> {
    let _busy = locker.enter()?;
    supported(locker)?;
    let keys = validate_id(locker, id)?;
    let mut spec = StoredSpec::parse(spec_json, Utc::now().timestamp_millis())?;
    if locker.is_scheduled(id) {
        return Err(SnatchError::type_arg(format!(
            "'{id}' is the name of a code schedule this locker runs (schedule()): code schedules and stored \
             schedules share one namespace"
        )));
    }
    for _ in 0..UPSERT_TRIES {
        let state = read_state(locker, &keys, false).await?;
        if state.code {
            return Err(SnatchError::type_arg(format!(
                "'{id}' is the name of a code schedule (schedule()): code schedules and stored schedules share one \
                 namespace"
            )));
        }
        let old: Option<StoredSpec> = state.spec.as_deref().and_then(|json| serde_json::from_str(json).ok());
        // `every` counts from when the schedule was first stored, unless it says from when.
        spec.anchor = match (&old, spec.every) {
            (_, None) => None,
            (_, Some(_)) if spec.start_at.is_some() => None,
            (Some(old), Some(_)) => old.anchor.or(Some(state.now)),
            (None, Some(_)) => Some(state.now),
        };
        let ticks = spec.ticks()?;
        let after = state.last.unwrap_or(i64::MIN).max(state.now);
        let next = match spec.at {
            Some(at) => (state.last.is_none_or(|last| last < at)).then_some(at),
            None => ticks.next_after(after),
        };
        let next = next.filter(|_| spec.limit.is_none_or(|limit| state.runs < limit));
        if let Some(old) = &old {
            superseded_by_change(locker, id, &keys, old, &state).await?;
        }
        let mut call = ScriptCall::new(&STORED_WRITE, 1);
        call.arg(&keys.state).arg(state.version.clone().unwrap_or_default());
        call.arg(serde_json::to_string(&spec).expect("a spec serializes"));
        call.arg(next.map_or_else(String::new, |n| n.to_string())).arg("0");
        match locker.nodes().first::<i64>(call).await? {
            -1 => {
                return Err(SnatchError::type_arg(format!(
                    "'{id}' is the name of a code schedule (schedule()): code schedules and stored schedules share \
                     one namespace"
                )))
            }
            -2 => continue,
            _ => {}
        }
        let leaves = old.as_ref().map(|old| old.handler.as_str()).filter(|&h| h != spec.handler);
        // A schedule with no next occurrence is finished by the first runner that visits it.
        let jitter = Jitter::new(id, spec.options()?.jitter);
        let score = Some(next.map_or(state.now, |next| jitter.start(next)));
        place(locker, Place { id, handler: &spec.handler, score, expect: None, leaves, sooner: false }).await?;
        return info(locker, id, &keys).await?.ok_or_else(|| SnatchError::Redis {
            cause: format!("stored schedule '{id}' was removed while it was written"),
        });
    }
    Err(SnatchError::Redis { cause: format!("stored schedule '{id}' kept changing while it was written") })
}

/// Records missed (`superseded`) the occurrences of `old`, the spec `state` holds, whose start has come and that no
/// runner dispatched yet (from its next tick up to the server's time, the newest [`MAX_LOOK_BACK`]): an upsert
/// computes the next occurrence from the new spec, so these would otherwise end without a record. Only where none is
/// yet: one a runner dispatches meanwhile keeps its own record, and its run.
async fn superseded_by_change(
    locker: &Locker,
    id: &str,
    keys: &ScheduleKeys,
    old: &StoredSpec,
    state: &State,
) -> Result<(), SnatchError> {
    let (Some(due), Ok(options), Ok(ticks)) = (state.next, old.options(), old.ticks()) else { return Ok(()) };
    let jitter = Jitter::new(id, options.jitter);
    let mut passed = Vec::new();
    let mut before = state.now + 1;
    while let Some(tick) = ticks.previous_before(before).filter(|&tick| tick >= due) {
        if jitter.start(tick) <= state.now {
            passed.push(tick);
        }
        if passed.len() == MAX_LOOK_BACK {
            break;
        }
        before = tick;
    }
    let keep = KEEP.max(options.starting_deadline * 2);
    for tick in passed {
        let write = Write::missed(Attempt::first(tick), Why::OnTime, "superseded");
        store::record(locker, keys, &write, options.history, keep, true, &[]).await?;
    }
    Ok(())
}

/// Removes stored schedule `id` (`removeSchedule`): true when it existed. Once this resolves, no occurrence of it
/// starts (an attempt's first record needs its spec).
pub async fn remove(locker: &Locker, id: &str) -> Result<bool, SnatchError> {
    let _busy = locker.enter()?;
    supported(locker)?;
    let keys = validate_id(locker, id)?;
    let mut call = ScriptCall::new(&STORED_REMOVE, 6);
    call.arg(&keys.state).arg(&keys.history).arg(&keys.records).arg(&keys.open).arg(&keys.replicas).arg(&keys.triggers);
    let Some(spec) = locker.nodes().first::<Option<String>>(call).await? else { return Ok(false) };
    if let Ok(spec) = serde_json::from_str::<StoredSpec>(&spec) {
        let out = Place { id, handler: &spec.handler, score: None, expect: None, leaves: None, sooner: false };
        place(locker, out).await?;
    }
    Ok(true)
}

/// Stored schedule `id` (`getSchedule`), as JSON: `null` when there is none.
pub async fn get(locker: &Locker, id: &str) -> Result<String, SnatchError> {
    let _busy = locker.enter()?;
    supported(locker)?;
    let keys = validate_id(locker, id)?;
    Ok(info(locker, id, &keys).await?.unwrap_or_else(|| "null".to_owned()))
}

/// The live runners of each handler: instance ids by handler.
async fn runners(locker: &Locker) -> Result<HashMap<String, Vec<String>>, SnatchError> {
    let mut call = ScriptCall::new(&STORED_RUNNERS, 1);
    call.arg(runners_key(&locker.config().prefix)).arg("?");
    let members: Vec<String> = locker.nodes().first(call).await?;
    let mut by_handler: HashMap<String, Vec<String>> = HashMap::new();
    for member in members {
        if let Some((handler, instance)) = member.split_once('\n') {
            by_handler.entry(handler.to_owned()).or_default().push(instance.to_owned());
        }
    }
    Ok(by_handler)
}

/// Stored schedule `id`'s info as JSON (`StoredScheduleInfo`), `None` when it is not stored.
async fn info(locker: &Locker, id: &str, keys: &ScheduleKeys) -> Result<Option<String>, SnatchError> {
    let runners = runners(locker).await?;
    info_with(locker, id, keys, &runners).await
}

async fn info_with(
    locker: &Locker,
    id: &str,
    keys: &ScheduleKeys,
    runners: &HashMap<String, Vec<String>>,
) -> Result<Option<String>, SnatchError> {
    let state = read_state(locker, keys, false).await?;
    let Some(spec) = state.spec.as_deref().and_then(|json| serde_json::from_str::<StoredSpec>(json).ok()) else {
        return Ok(None);
    };
    let read = store::read(locker, keys, 1).await?;
    let running: Vec<Record> = read.open.iter().filter(|r| r.outcome == Status::Running).cloned().collect();
    let last = read.records.iter().find(|r| r.outcome != Status::Running).cloned();
    let options = spec.options()?;
    let live = runners.get(&spec.handler).map_or(0, Vec::len);
    let limits = Limits {
        timeout: options.timeout,
        max_runtime: options.max_runtime,
        starting_deadline: options.starting_deadline,
        jitter: options.jitter,
    };
    let observed = Observed {
        // A finished schedule needs no runner.
        replicas: if state.done.is_some() { live.max(1) } else { live },
        suspended: state.suspended,
        limits,
        running: &running,
        last: last.as_ref(),
        unrecorded: state.next,
    };
    let health = Health::of(&observed, state.now);
    let mut out = spec.public();
    out.insert("id".to_owned(), Value::from(id));
    out.insert("next".to_owned(), state.next.map_or(Value::Null, Value::from));
    out.insert("suspended".to_owned(), Value::from(state.suspended));
    out.insert("runs".to_owned(), Value::from(state.runs));
    out.insert("last".to_owned(), last.map_or(Value::Null, |r| serde_json::to_value(r).unwrap_or(Value::Null)));
    out.insert("running".to_owned(), serde_json::to_value(&running).unwrap_or(Value::Null));
    out.insert("health".to_owned(), serde_json::to_value(health).unwrap_or(Value::Null));
    out.insert("runners".to_owned(), Value::from(live));
    out.insert("finished".to_owned(), state.done.map_or(Value::Null, Value::from));
    Ok(Some(Value::Object(out).to_string()))
}

/// One page of the stored schedules (`listSchedules`), as JSON `{schedules, cursor}`: `limit` at most, from `cursor`
/// (`null` for the first page; the answer's is `null` on the last), of handler `handler` only if given, their ids
/// matching the glob `pattern` if given. Ordered by bucket, handler, then due time.
pub async fn list(
    locker: &Locker,
    handler: Option<&str>,
    pattern: Option<&str>,
    limit: u32,
    cursor: Option<&str>,
) -> Result<String, SnatchError> {
    let _busy = locker.enter()?;
    supported(locker)?;
    if limit == 0 || limit > 1000 {
        return Err(SnatchError::range_arg("limit must be from 1 to 1000"));
    }
    let bad_cursor = || SnatchError::type_arg("not a cursor that listSchedules gave");
    let (mut bucket, mut handler_at, mut offset) = match cursor {
        None => (0, 0, 0),
        Some(cursor) => {
            let parts: Vec<u32> =
                cursor.split('.').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad_cursor())?;
            match parts.as_slice() {
                &[b, h, o] if b < BUCKETS => (b, h as usize, o),
                _ => return Err(bad_cursor()),
            }
        }
    };
    let prefix = locker.config().prefix.clone();
    let runners = runners(locker).await?;
    let mut infos = Vec::new();
    while bucket < BUCKETS && infos.len() < limit as usize {
        let keys = BucketKeys::new(&prefix, bucket);
        let handlers: Vec<String> = match handler {
            Some(handler) => vec![handler.to_owned()],
            None => {
                let mut call = ScriptCall::new(&STORED_LIST, 1);
                call.arg(keys.handlers()).arg(0).arg(0);
                locker.nodes().first::<(Vec<String>, Vec<String>, Vec<String>)>(call).await?.0
            }
        };
        let Some(name) = handlers.get(handler_at) else {
            (bucket, handler_at, offset) = (bucket + 1, 0, 0);
            continue;
        };
        let want = limit as usize - infos.len();
        let mut call = ScriptCall::new(&STORED_LIST, 2);
        call.arg(keys.handlers()).arg(keys.due(name)).arg(offset).arg(want);
        let (_, ids, _): (Vec<String>, Vec<String>, Vec<String>) = locker.nodes().first(call).await?;
        offset += ids.len() as u32;
        if ids.len() < want {
            (handler_at, offset) = (handler_at + 1, 0);
        }
        let ids: Vec<String> = ids.into_iter().filter(|id| pattern.is_none_or(|p| glob_match(p, id))).collect();
        let found = join_all(ids.iter().map(|id| async {
            let keys = ScheduleKeys::new(&prefix, id, locker.one_slot())?;
            info_with(locker, id, &keys, &runners).await
        }))
        .await;
        for info in found {
            if let Some(info) = info? {
                infos.push(info);
            }
        }
    }
    let cursor = (bucket < BUCKETS).then(|| format!("\"{bucket}.{handler_at}.{offset}\""));
    Ok(format!("{{\"schedules\":[{}],\"cursor\":{}}}", infos.join(","), cursor.as_deref().unwrap_or("null")))
}

/// A schedule due this long ago and not yet taken by a runner counts as overdue in [`summary`].
pub const OVERDUE: Duration = Duration::from_secs(60);

/// The stored schedules by handler, as JSON `[{ handler, schedules, overdue, runners }]`: how many each handler has,
/// how many of them have been due for over [`OVERDUE`] without a runner taking them, and its live runners. Reads the
/// due index's counts (two per handler and bucket), never the schedules: its cost does not grow with them.
pub async fn summary(locker: &Locker) -> Result<String, SnatchError> {
    let _busy = locker.enter()?;
    supported(locker)?;
    let prefix = locker.config().prefix.clone();
    let runners = runners(locker).await?;
    let mut by_handler: std::collections::BTreeMap<String, (i64, i64)> = std::collections::BTreeMap::new();
    for bucket in 0..BUCKETS {
        let keys = BucketKeys::new(&prefix, bucket);
        let mut call = ScriptCall::new(&STORED_LIST, 1);
        call.arg(keys.handlers()).arg(0).arg(0);
        let (handlers, _, _): (Vec<String>, Vec<String>, Vec<String>) = locker.nodes().first(call).await?;
        for handler in handlers {
            let mut call = ScriptCall::new(&STORED_COUNT, 1);
            call.arg(keys.due(&handler)).arg(OVERDUE.as_millis() as u64);
            let (count, overdue): (i64, i64) = locker.nodes().first(call).await?;
            let entry = by_handler.entry(handler).or_default();
            entry.0 += count;
            entry.1 += overdue;
        }
    }
    for handler in runners.keys() {
        by_handler.entry(handler.clone()).or_default();
    }
    let rows: Vec<Value> = by_handler
        .into_iter()
        .map(|(handler, (schedules, overdue))| {
            let live = runners.get(&handler).map_or(0, Vec::len);
            serde_json::json!({ "handler": handler, "schedules": schedules, "overdue": overdue, "runners": live })
        })
        .collect();
    Ok(Value::Array(rows).to_string())
}

/// Whether `text` matches the glob `pattern` (`*` any run, `?` any one character, `\` quotes the next).
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some(pi);
                mark = ti;
                pi += 1;
            }
            Some('?') => {
                pi += 1;
                ti += 1;
            }
            Some('\\') if p.get(pi + 1) == Some(&t[ti]) => {
                pi += 2;
                ti += 1;
            }
            Some(&c) if c == t[ti] && c != '\\' => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some(s) => {
                    pi = s + 1;
                    mark += 1;
                    ti = mark;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether `id` names a stored schedule, and if so its handler's live runners: for `trigger`.
pub(crate) async fn trigger(locker: &Locker, id: &str) -> Result<Option<i64>, SnatchError> {
    if locker.nodes().single().is_none() {
        return Ok(None);
    }
    let keys = ScheduleKeys::new(&locker.config().prefix, id, locker.one_slot())?;
    let state = read_state(locker, &keys, false).await?;
    let Some(spec) = state.spec.as_deref().and_then(|json| serde_json::from_str::<StoredSpec>(json).ok()) else {
        return Ok(None);
    };
    let live = runners(locker).await?.get(&spec.handler).map_or(0, Vec::len);
    let (live, tick) = store::control(locker, &keys, Control::Trigger, KEEP, Some(live)).await?;
    if live == 0 {
        return Err(SnatchError::NoReplica { schedule: id.to_owned() });
    }
    let now = Some(state.now);
    place(locker, Place { id, handler: &spec.handler, score: now, expect: None, leaves: None, sooner: true }).await?;
    Ok(Some(tick))
}

/// This replica running a handler (`locker.handle`).
#[derive(Clone)]
pub struct Handler(Job);

impl Handler {
    /// Takes no more occurrences, and waits for those running here to settle and be recorded. Idempotent.
    pub async fn stop(&self) {
        self.0.stop().await;
    }
}

/// Makes this replica a runner of handler `name` (the caller's id for it: `id`): the occurrences of the stored
/// schedules whose handler it is run here (at most `max_running` at once), each attempt through the runner (`post`),
/// as a code schedule's do, with the stored schedule's id and data. Within the Tokio runtime.
pub fn handle(
    locker: &Locker,
    id: u32,
    name: &str,
    max_running: Option<u32>,
    post: Arc<dyn Post>,
) -> Result<Handler, SnatchError> {
    supported(locker)?;
    validate_handler(name)?;
    if max_running == Some(0) {
        return Err(SnatchError::range_arg("maxRunning must be 1 or more"));
    }
    let guard = locker.enter()?;
    let job = Job::new();
    let running = max_running.map_or(Semaphore::MAX_PERMITS, |n| n as usize);
    let runner = Arc::new(Runner {
        locker: locker.clone(),
        id,
        name: name.to_owned(),
        post,
        running: Arc::new(Semaphore::new(running)),
        skew: Mutex::new(0),
        stop: job.stop_requests(),
    });
    let handle = job.clone();
    tokio::spawn(async move {
        runner.run(handle.stop_requests()).await;
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Handler(job))
}

/// Where a runner's visits place their schedules again.
struct Places {
    /// To [`place_in_batches`].
    placer: mpsc::UnboundedSender<Placing>,
    /// To the runner's loop: where a schedule was placed (bucket, score), known there without a wake-up.
    placed: mpsc::UnboundedSender<(usize, i64)>,
}

impl Places {
    /// Places schedule `id`, taken at score `held`, again: due at `score`, or out of the index (`None`).
    async fn again(&self, id: &str, score: Option<i64>, held: i64) {
        let (placed, told) = oneshot::channel();
        let _ = self.placer.send(Placing { id: id.to_owned(), score, held, placed });
        if let (Ok(true), Some(score)) = (told.await, score) {
            let _ = self.placed.send((bucket_of(id) as usize, score));
        }
    }
}

/// One handler on this replica.
struct Runner {
    locker: Locker,
    /// The caller's id for the handler.
    id: u32,
    name: String,
    post: Arc<dyn Post>,
    /// Permits for the occurrences running here (`maxRunning`).
    running: Arc<Semaphore>,
    /// The server's clock minus this replica's, in ms, as last seen.
    skew: Mutex<i64>,
    /// Whether the handler is asked to stop here.
    stop: watch::Receiver<bool>,
}

impl Runner {
    /// Runs the handler until stopped, then waits for the visits under way and takes its registration away.
    async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let prefix = self.locker.config().prefix.clone();
        let buckets: Vec<BucketKeys> = (0..BUCKETS).map(|b| BucketKeys::new(&prefix, b)).collect();
        let woken = Arc::new(Notify::new());
        let mut watches = Vec::new();
        for node in self.locker.nodes().all() {
            for bucket in &buckets {
                watches.extend(node.watch_channel(&bucket.wake(), &woken).await);
            }
        }
        let mut visits = JoinSet::new();
        let mut heads: Vec<Option<i64>> = vec![None; buckets.len()];
        // Where this runner's visits placed their schedules (bucket, score): known here without a wake-up.
        let (placed, mut placements) = mpsc::unbounded_channel::<(usize, i64)>();
        let (placer, placings) = mpsc::unbounded_channel();
        let batches = tokio::spawn(place_in_batches(self.locker.clone(), self.name.clone(), placings));
        let places = Arc::new(Places { placer, placed });
        let mut refresh_at = Instant::now();
        let mut beat_at = Instant::now();
        loop {
            if *stop.borrow() {
                break;
            }
            let now = Instant::now();
            if now >= beat_at {
                let _ = self.register(&format!("{}", REGISTRATION.as_millis())).await;
                beat_at = now + HEARTBEAT;
            }
            if now >= refresh_at {
                if let Ok(read) = self.heads(&buckets).await {
                    heads = read;
                }
                refresh_at = now + REFRESH;
            }
            // Take what is due, bucket by bucket, in batches, as permits allow.
            let server_now = self.server_now();
            for (bucket, head) in buckets.iter().zip(heads.iter_mut()) {
                if head.is_none_or(|h| h > server_now) {
                    continue;
                }
                let batch = (self.running.available_permits() as u32).min(BATCH);
                if batch == 0 {
                    break;
                }
                match self.take(bucket, batch).await {
                    Ok((taken, held, next)) => {
                        *head =
                            if taken.len() as u32 >= batch { Some(server_now) } else { (next >= 0).then_some(next) };
                        for id in taken {
                            let permit = self.running.clone().acquire_owned().await;
                            let (runner, places) = (self.clone(), places.clone());
                            visits.spawn(async move {
                                let _permit = permit;
                                runner.visit(&id, held, &places).await;
                            });
                        }
                    }
                    Err(_) => *head = Some(server_now + 1000),
                }
            }
            let due = heads.iter().flatten().min().map(|&h| self.local(h));
            let mut wake = refresh_at.min(beat_at);
            if let Some(due) = due {
                wake = wake.min(due);
            }
            let full = self.running.available_permits() == 0;
            tokio::select! {
                _ = stop.changed() => {}
                () = sleep_until(wake), if !full => {}
                () = woken.notified() => refresh_at = Instant::now(),
                Some((bucket, score)) = placements.recv() => {
                    let head = &mut heads[bucket];
                    *head = Some(head.map_or(score, |head| head.min(score)));
                }
                Some(_) = visits.join_next(), if !visits.is_empty() => {}
            }
        }
        drop(watches);
        while visits.join_next().await.is_some() {}
        drop(places);
        let _ = batches.await;
        let _ = self.register("-").await;
    }

    /// This replica's time of the server's `ms`.
    fn local(&self, ms: i64) -> Instant {
        let wait = ms - self.server_now();
        Instant::now() + Duration::from_millis(u64::try_from(wait).unwrap_or(0))
    }

    /// The server's time now, as last seen.
    fn server_now(&self) -> i64 {
        Utc::now().timestamp_millis() + *self.skew.lock().expect("skew poisoned")
    }

    fn saw(&self, server_now: i64) {
        *self.skew.lock().expect("skew poisoned") = server_now - Utc::now().timestamp_millis();
    }

    /// Renews (a TTL in ms) or takes away (`-`) this replica's registration as a runner of the handler.
    async fn register(&self, how: &str) -> Result<(), SnatchError> {
        let mut call = ScriptCall::new(&STORED_RUNNERS, 1);
        call.arg(runners_key(&self.locker.config().prefix)).arg(how);
        call.arg(runner(&self.name, &self.locker.config().instance_id));
        self.locker.nodes().first::<Value2>(call).await.map(drop)
    }

    /// The head of the handler's due index in each bucket.
    async fn heads(&self, buckets: &[BucketKeys]) -> Result<Vec<Option<i64>>, SnatchError> {
        let reads = join_all(buckets.iter().map(|bucket| {
            let mut call = ScriptCall::new(&STORED_HEADS, 1);
            call.arg(bucket.due(&self.name));
            self.locker.nodes().first::<(i64, Vec<i64>)>(call)
        }))
        .await;
        let mut heads = Vec::with_capacity(buckets.len());
        for read in reads {
            let (now, found) = read?;
            self.saw(now);
            heads.push(found.first().copied().filter(|&h| h >= 0));
        }
        Ok(heads)
    }

    /// Takes up to `batch` due schedules of the bucket: their ids, the score they are held at, the next head.
    async fn take(&self, bucket: &BucketKeys, batch: u32) -> Result<(Vec<String>, i64, i64), SnatchError> {
        let mut call = ScriptCall::new(&STORED_TAKE, 1);
        call.arg(bucket.due(&self.name)).arg(batch).arg(TAKE_HOLD.as_millis() as u64);
        let taken: (Vec<String>, i64, i64) = self.locker.nodes().first(call).await?;
        self.saw(taken.1 - TAKE_HOLD.as_millis() as i64);
        Ok(taken)
    }

    /// Visits stored schedule `id`, taken at score `held`: its open attempts, its manual runs, its due occurrence;
    /// then places it again, for when it next needs a runner. Waits for the attempts it started.
    async fn visit(self: &Arc<Self>, id: &str, held: i64, places: &Places) {
        let locker = &self.locker;
        let prefix = &locker.config().prefix;
        let Ok(keys) = ScheduleKeys::new(prefix, id, locker.one_slot()) else { return };
        let Ok(state) = read_state(locker, &keys, true).await else { return };
        let spec = state.spec.as_deref().and_then(|json| serde_json::from_str::<StoredSpec>(json).ok());
        let Some(spec) = spec.filter(|spec| spec.handler == self.name) else {
            // Removed, or moved to another handler (whose index has it).
            places.again(id, None, held).await;
            return;
        };
        let (Ok(options), Ok(ticks)) = (spec.options(), spec.ticks()) else {
            places.again(id, None, held).await;
            return;
        };
        let (work, mut looks) = mpsc::unbounded_channel();
        let driver = Arc::new(Driver {
            locker: locker.clone(),
            id: self.id,
            keys: keys.clone(),
            lock: LockOptions { ttl: options.ttl, auto_extend: true, ..LockOptions::default() },
            options: options.clone(),
            registration: Registration {
                instance: locker.config().instance_id.clone(),
                cron: spec.cron.clone().unwrap_or_default(),
                timezone: spec.timezone.clone().unwrap_or_else(|| "UTC".to_owned()),
                limits: Limits::default(),
                keep: KEEP.max(options.starting_deadline * 2),
            },
            post: self.post.clone(),
            here: Mutex::default(),
            work,
            stored: Some(Arc::new(StoredRun { id: id.to_owned(), data: spec.data.clone() })),
            dispatched: Mutex::default(),
            jitter: Jitter::new(id, options.jitter),
            stop: self.stop.clone(),
        });
        let lease = locker.lease_ttl(&driver.lock);
        let mut attempts = JoinSet::new();
        let mut again: Option<i64> = None;
        let sooner = |at: i64, again: &mut Option<i64>| *again = Some(again.map_or(at, |a: i64| a.min(at)));
        // The open attempts: a dead runner's taken over, a retry that is due.
        let swept = if state.open { store::sweep(locker, &keys).await } else { Ok(store::Swept::default()) };
        if let Ok(swept) = swept {
            if let Some(lapses) = swept.again {
                sooner(state.now + (lapses + LOOK_SLACK).as_millis() as i64, &mut again);
            }
            for found in swept.found {
                match Next::after(&found, options.retries) {
                    Next::Attempt(attempt) => {
                        let start = Start { attempt, why: Why::Retry, follows: Some(found) };
                        attempts.spawn(driver.clone().attempt(start, state.suspended));
                    }
                    Next::GiveUp(write) => drop(driver.record(&write).await),
                }
            }
        }
        // The manual runs asked for.
        if state.triggers {
            while let Ok(Some(tick)) = store::take_trigger(locker, &keys).await {
                let attempt = Attempt { tick, manual: true, attempt: 1 };
                let start = Start { attempt, why: Why::Manual, follows: None };
                attempts.spawn(driver.clone().attempt(start, state.suspended));
            }
        }
        let mut next = state.next;
        if let Some(due) = state.next.filter(|&due| driver.jitter.start(due) <= state.now) {
            next = self.dispatch(&driver, &state, &spec, &ticks, due, &mut attempts).await;
            if next == Some(due) {
                // Not placed (another replica holds its claim, or Redis failed): looked at when the claim would lapse.
                sooner(state.now + (lease + LOOK_SLACK).as_millis() as i64, &mut again);
            } else if !attempts.is_empty() {
                // Looked at once its claim would lapse, should this replica die while it runs.
                sooner(state.now + (lease + LOOK_SLACK).as_millis() as i64, &mut again);
            }
        } else if state.next.is_none() && state.done.is_none() {
            // Stored with no occurrence left: finished.
            let _ = advance(locker, &keys, &Advance::new(state.version.clone(), None, None, false)).await;
        }
        let score = match (next.map(|next| driver.jitter.start(next)), again) {
            (Some(next), Some(again)) => next.min(again),
            (Some(next), None) => next,
            (None, Some(again)) => again,
            // Its keys expire after the retention: then a visit finds it gone.
            (None, None) => state.now + FINISHED_RETENTION.as_millis() as i64,
        };
        places.again(id, Some(score), held).await;
        // With `replace`, a later occurrence, on any replica, asks the attempts running here to give way on the
        // schedule's control channel (as a code schedule's replicas hear it); the state is read once the channel is
        // watched, for one asked before.
        let replaced = Arc::new(Notify::new());
        let mut watches = Vec::new();
        if options.concurrency == Concurrency::Replace && !attempts.is_empty() {
            for node in locker.nodes().all() {
                watches.extend(node.watch_channel(&keys.control, &replaced).await);
            }
            replaced.notify_one();
        }
        // While its attempts run: a retry due, a hand-over, another replica's claim to look at again, a replace.
        loop {
            tokio::select! {
                joined = attempts.join_next() => if joined.is_none() { break },
                () = replaced.notified(), if !watches.is_empty() => {
                    let read = store::read(locker, &keys, 1).await;
                    if let Some(tick) = read.ok().and_then(|read| read.state.get("replace")?.parse::<i64>().ok()) {
                        driver.abort_here(|attempt| attempt.tick < tick, AbortReason::Replaced);
                    }
                }
                Some(work) = looks.recv() => {
                    if let Work::LookAt(at) = work {
                        let wait = at.saturating_duration_since(Instant::now()).as_millis() as i64;
                        let at = Some(self.server_now() + wait);
                        let handler = &self.name;
                        let sooner = Place { id, handler, score: at, expect: None, leaves: None, sooner: true };
                        if let (Ok(true), Some(at)) = (place(locker, sooner).await, at) {
                            let _ = places.placed.send((bucket_of(id) as usize, at));
                        }
                    }
                }
            }
        }
    }

    /// Dispatches the due occurrence of a schedule whose next tick `due` has come: the newest tick up to now runs (on
    /// time, or late within `startingDeadline`) or is recorded missed, the ones before it recorded superseded; once
    /// its first record is written, the schedule's next tick is. The next tick (`due` again when not dispatched).
    async fn dispatch(
        &self,
        driver: &Arc<Driver>,
        state: &State,
        spec: &StoredSpec,
        ticks: &StoredTicks,
        due: i64,
        attempts: &mut JoinSet<()>,
    ) -> Option<i64> {
        let now = state.now;
        // The ticks from `due` up to now (the newest MAX_LOOK_BACK of them); the newest runs.
        let mut passed = Vec::new();
        let mut before = now + 1;
        while let Some(tick) = ticks.previous_before(before).filter(|&tick| tick >= due) {
            passed.push(tick);
            if passed.len() == MAX_LOOK_BACK {
                break;
            }
            before = tick;
        }
        passed.reverse();
        if passed.is_empty() {
            passed.push(due);
        }
        let newest = *passed.last().expect("one tick");
        let following = ticks.next_after(newest).filter(|_| spec.limit.is_none_or(|limit| state.runs + 1 < limit));
        for &tick in &passed[..passed.len() - 1] {
            let _ = driver.record(&Write::missed(Attempt::first(tick), Why::OnTime, "superseded")).await;
        }
        let age = now - driver.jitter.start(newest);
        let deadline = driver.options.starting_deadline.as_millis() as i64;
        if age > deadline.max(ON_TIME_WITHIN.as_millis() as i64) {
            if driver.record(&Write::missed(Attempt::first(newest), Why::OnTime, "deadline")).await.is_err() {
                return Some(due);
            }
            // Changed meanwhile (an upsert, a removal), the change placed it as it says; this placing is then refused.
            let _ =
                advance(&self.locker, &driver.keys, &Advance::new(state.version.clone(), Some(due), following, true))
                    .await;
        } else {
            let why = if age <= ON_TIME_WITHIN.as_millis() as i64 { Why::OnTime } else { Why::Late };
            let attempt = Attempt::first(newest);
            let (tell, told) = oneshot::channel();
            let advance = Some(Advance::new(state.version.clone(), Some(due), following, true));
            *driver.dispatched.lock().expect("dispatched poisoned") = Some(Dispatch { attempt, tell, advance });
            attempts.spawn(driver.clone().attempt(Start { attempt, why, follows: None }, state.suspended));
            // Its next tick is written with its first record (dispatch.rs).
            if !told.await.unwrap_or(false) {
                return Some(due);
            }
        }
        following
    }
}

/// Writes `advance` on its own: false when the state changed meanwhile.
async fn advance(locker: &Locker, keys: &ScheduleKeys, advance: &Advance) -> Result<bool, SnatchError> {
    let mut call = ScriptCall::new(&STORED_ADVANCE, 5);
    call.arg(&keys.state).arg(&keys.history).arg(&keys.records).arg(&keys.open).arg(&keys.triggers);
    advance.words(&mut call);
    Ok(locker.nodes().first::<i64>(call).await? == 1)
}

/// Any reply.
type Value2 = redis::Value;

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn a_spec_needs_exactly_one_of_cron_every_and_at_and_no_unknown_option() {
        let ok =
            StoredSpec::parse(r#"{"handler":"mail","cron":"0 8 * * *","timezone":"Europe/Paris","data":{"u":1}}"#, NOW)
                .unwrap();
        assert_eq!(ok.data.as_deref(), Some(r#"{"u":1}"#));
        for (json, says) in [
            (r#"{"handler":"mail"}"#, "exactly one"),
            (r#"{"handler":"mail","cron":"* * * * *","every":5000}"#, "exactly one"),
            (r#"{"handler":"mail","every":999}"#, "1000"),
            (r#"{"handler":"mail","every":5000,"colour":1}"#, "unknown option 'colour'"),
            (r#"{"every":5000}"#, "handler"),
            (r#"{"handler":"","every":5000}"#, "handler name"),
            (r#"{"handler":"mail","cron":"nope"}"#, ""),
            (r#"{"handler":"mail","at":1000}"#, "in the past"),
        ] {
            let error = StoredSpec::parse(json, NOW).unwrap_err();
            assert!(error.to_string().contains(says), "{json}: {error}");
            assert_eq!(error.code(), "ERR_SNATCH_INVALID_ARG");
        }
        let big = format!(r#"{{"handler":"mail","every":5000,"data":"{}"}}"#, "x".repeat(MAX_DATA_BYTES));
        assert!(StoredSpec::parse(&big, NOW).unwrap_err().to_string().contains("bytes"));
        let late = format!(r#"{{"handler":"mail","at":{}}}"#, NOW - 60_000);
        assert!(StoredSpec::parse(&late, NOW).is_ok(), "within the starting deadline");
    }

    #[test]
    fn every_counts_from_its_anchor_within_start_and_end() {
        let spec = StoredSpec {
            handler: "h".into(),
            every: Some(1000),
            anchor: Some(10_500),
            end_at: Some(13_500),
            ..StoredSpec::default()
        };
        let ticks = spec.ticks().unwrap();
        assert_eq!(ticks.next_after(0), Some(10_500));
        assert_eq!(ticks.next_after(10_500), Some(11_500));
        assert_eq!(ticks.next_after(13_500), None);
        assert_eq!(ticks.previous_before(12_000), Some(11_500));
    }

    #[test]
    fn the_compact_spec_of_a_per_user_cron_is_small() {
        let spec = StoredSpec::parse(
            &format!(
                r#"{{"handler":"digest","cron":"0 8 * * *","timezone":"America/Los_Angeles","data":"{}"}}"#,
                "d".repeat(62)
            ),
            NOW,
        )
        .unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        assert!(json.len() < 140, "{} bytes: {json}", json.len());
    }

    #[test]
    fn globs_match_ids() {
        assert!(glob_match("user:*:digest", "user:42:digest"));
        assert!(glob_match("user:?", "user:7"));
        assert!(!glob_match("user:?", "user:77"));
        assert!(glob_match("*", ""));
    }
}
