//! A schedule's names in Redis, and what it records there of its occurrences, without I/O: which attempt of which
//! occurrence a record is for, why it ran, what it came to; when a failed attempt is tried again; which missed
//! occurrence still runs late.

use crate::keys::LockKeys;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How many occurrence records a schedule keeps by default (`history`).
pub const DEFAULT_HISTORY: u32 = 50;

/// The most occurrence records a schedule may keep.
pub const MAX_HISTORY: u32 = 10_000;

/// Longest error message a record keeps, in characters (a longer one is cut, with an ellipsis).
pub const MAX_ERROR_CHARS: usize = 500;

/// The Redis names of schedule `name`: its run lock (and fence counter), and beside it, in the same hash slot, its
/// state, records, registrations, pending triggers and control channel. Every one of them has a TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleKeys {
    /// The run lock, whose fence counter every claim of the schedule shares.
    pub run: LockKeys,
    /// A hash: `since` (when first registered, server ms), `last` (the newest tick a look back settled, see
    /// [`CatchUp`]),
    /// `suspended`, `replace` (running attempts of ticks before it give way), `manual` (the last manual run's tick),
    /// `cron`, `timezone`.
    pub state: String,
    /// A sorted set of record ids, scored by tick and attempt (see [`Attempt::score`]).
    pub history: String,
    /// A hash: record id → the record (JSON, [`Record`]).
    pub records: String,
    /// A sorted set of the attempts running or waiting for a retry: record id → when to look at it again (server ms).
    pub open: String,
    /// A sorted set: instance → when its registration expires (server ms).
    pub replicas: String,
    /// A list of manual runs asked for and not yet taken by a replica (`trigger`).
    pub triggers: String,
    /// The channel on which suspend, resume, trigger and replace are announced to the replicas.
    pub control: String,
    one_slot: bool,
}

impl ScheduleKeys {
    /// The names of schedule `name` under `prefix`; with `one_slot` (Redis Cluster) all in the run lock's slot.
    pub fn new(prefix: &str, name: &str, one_slot: bool) -> Result<Self, crate::SnatchError> {
        let run = LockKeys::new(prefix, name, one_slot)?;
        // The run lock's: `{lock}:…`, unless the lock key has a hash tag of its own on a cluster (`lock:…`).
        let beside = |suffix: &str| run.companion(suffix, one_slot);
        let (state, history, records, open) = (beside("state"), beside("history"), beside("records"), beside("open"));
        let (replicas, triggers, control) = (beside("replicas"), beside("triggers"), beside("control"));
        Ok(Self { run, state, history, records, open, replicas, triggers, control, one_slot })
    }

    /// The claim of `attempt`: the lock only one replica gets.
    pub fn claim(&self, attempt: &Attempt) -> LockKeys {
        LockKeys::occurrence(&self.run, &attempt.id(), self.one_slot)
    }

    /// The buffer slot (`concurrency: 'buffer'`): the lock of the one occurrence that waits for the run lock.
    pub fn buffer(&self) -> LockKeys {
        LockKeys::occurrence(&self.run, "buffer", self.one_slot)
    }

    /// What the keys of its claims start with (then the attempt's id).
    pub fn claims(&self) -> String {
        self.run.beside("", self.one_slot)
    }

    /// The name of the schedule whose state `key` holds, under `prefix` (what a scan for schedules finds: every
    /// schedule a replica registered, whose state is kept a week after its last replica went).
    pub fn name_of_state(prefix: &str, key: &str, one_slot: bool) -> Option<String> {
        let base = key.strip_suffix(":state")?;
        let name = match base.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
            Some(lock) => lock.strip_prefix(prefix)?,
            None => base.strip_prefix(prefix)?,
        };
        Self::new(prefix, name, one_slot).ok().filter(|keys| keys.state == key).map(|_| name.to_owned())
    }
}

/// Which attempt of which occurrence: a scheduled tick, or a manual run (`trigger`) at the time it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The occurrence, in epoch ms: the cron tick, or when a manual run was asked for.
    pub tick: i64,
    /// A manual run (`trigger`), not a cron tick.
    pub manual: bool,
    /// 1 for the first attempt.
    pub attempt: u32,
}

impl Attempt {
    /// The first attempt of scheduled occurrence `tick`.
    pub fn first(tick: i64) -> Self {
        Self { tick, manual: false, attempt: 1 }
    }

    /// The next attempt of the same occurrence.
    pub fn next(&self) -> Self {
        Self { attempt: self.attempt + 1, ..*self }
    }

    /// Its id, which names its record and its claim: the tick, `m` after it for a manual run, `:<attempt>` after
    /// that from the second attempt on (the first attempt of a scheduled tick is the claim earlier versions made).
    pub fn id(&self) -> String {
        let manual = if self.manual { "m" } else { "" };
        match self.attempt {
            1 => format!("{}{manual}", self.tick),
            n => format!("{}{manual}:{n}", self.tick),
        }
    }

    /// The attempt an id names.
    pub fn parse(id: &str) -> Option<Self> {
        let (occurrence, attempt) = match id.split_once(':') {
            Some((occurrence, attempt)) => (occurrence, attempt.parse().ok().filter(|&n| n > 1)?),
            None => (id, 1),
        };
        let (tick, manual) = match occurrence.strip_suffix('m') {
            Some(tick) => (tick, true),
            None => (occurrence, false),
        };
        Some(Self { tick: tick.parse().ok()?, manual, attempt })
    }

    /// Its place in the history, newest last: by tick, then attempt (an attempt's number counts up to 999 here).
    pub fn score(&self) -> i64 {
        self.tick.saturating_mul(1000) + i64::from(self.attempt.min(999))
    }
}

/// Why an attempt ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// At its tick.
    OnTime,
    /// After its tick, no replica having run it then (`startingDeadline`).
    Late,
    /// Again, after an attempt failed, or its runner died.
    Retry,
    /// Asked for (`trigger`).
    Manual,
}

impl Why {
    /// Its name, as records have it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnTime => "on-time",
            Self::Late => "late",
            Self::Retry => "retry",
            Self::Manual => "manual",
        }
    }
}

/// What an attempt came to (a record's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// fn is running.
    Running,
    /// fn resolved.
    Ok,
    /// fn threw or rejected (or was replaced).
    Failed,
    /// fn did not settle within `timeout`.
    Timeout,
    /// The lease could not be guaranteed for the whole run.
    Lost,
    /// Its runner died: the claim lapsed while the record still said running.
    Crashed,
    /// Its replica shut down (`close`) before fn settled: its next attempt runs at once, on another replica.
    Interrupted,
    /// It did not run: see the record's `reason`.
    Missed,
}

impl Status {
    /// How an attempt can end (every status but `running`).
    pub const ENDED: [Self; 7] =
        [Self::Ok, Self::Failed, Self::Timeout, Self::Lost, Self::Crashed, Self::Interrupted, Self::Missed];

    /// Its name, as the caller hears it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Lost => "lost",
            Self::Crashed => "crashed",
            Self::Interrupted => "interrupted",
            Self::Missed => "missed",
        }
    }
}

/// One attempt of one occurrence, as Redis keeps it (JSON; times in epoch ms, the fence as a string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub tick: i64,
    #[serde(default)]
    pub manual: bool,
    pub attempt: u32,
    pub why: Why,
    /// The instance that ran it (none when missed).
    pub instance: Option<String>,
    pub fence: Option<String>,
    pub started: Option<i64>,
    pub duration_ms: Option<f64>,
    pub outcome: Status,
    /// The error's message, cut at [`MAX_ERROR_CHARS`].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Why it did not run (missed): `deadline`, `superseded`, `overlap`, `suspended`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// When the next attempt is due (a failed attempt with retries left).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retry_at: Option<i64>,
}

impl Record {
    /// Which attempt it is.
    pub fn attempt(&self) -> Attempt {
        Attempt { tick: self.tick, manual: self.manual, attempt: self.attempt }
    }

    /// The record of an occurrence that did not run, for `reason`.
    pub fn missed(attempt: Attempt, why: Why, reason: &str) -> Self {
        Self {
            tick: attempt.tick,
            manual: attempt.manual,
            attempt: attempt.attempt,
            why,
            instance: None,
            fence: None,
            started: None,
            duration_ms: None,
            outcome: Status::Missed,
            error: None,
            reason: Some(reason.to_owned()),
            retry_at: None,
        }
    }

    /// The record as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }

    /// A record from its JSON; `None` for one that is not (say, written by a later version).
    pub fn from_json(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }
}

/// When a record is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conditions {
    /// Not while the schedule is suspended.
    pub unless_suspended: bool,
    /// Only if the attempt has no record yet (nobody ran it).
    pub only_new: bool,
    /// With `only_new`: a record saying missed may be written over (an attempt that waited in the buffer slot, holding
    /// its claim, which a look back meanwhile took for missed).
    pub over_missed: bool,
    /// Only if the attempt's record says it is running (no other replica took it over).
    pub only_running: bool,
    /// Only while the attempt still holds its claim and the buffer slot it waited in: a waiter stopped past their
    /// lease (another occurrence may have taken the slot meanwhile) does not run.
    pub holds_buffer: bool,
}

/// What becomes of an attempt among the open ones when its record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// As it was.
    Unchanged,
    /// It is no longer open.
    Closed,
    /// It is open, to be looked at again after this long (when its lease would have lapsed, or its retry is due).
    LookIn(Duration),
}

/// A record as a look at the open attempts found it: read, and its JSON exactly as stored (what a takeover compares it
/// with, since a record written again from what was read need not be the same text: a float's last digit, a field of a
/// later version).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub record: Record,
    pub json: String,
}

/// A record to write, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub record: Record,
    pub conditions: Conditions,
    pub open: Open,
    /// The attempt this one takes over: its record as it must still be (as found), and as it becomes.
    pub takes_over: Option<(Found, Record)>,
}

impl Write {
    /// The record of `attempt`, which did not run for `reason` (unless it has a record already).
    pub fn missed(attempt: Attempt, why: Why, reason: &str) -> Self {
        let conditions = Conditions { only_new: true, ..Conditions::default() };
        Self { record: Record::missed(attempt, why, reason), conditions, open: Open::Unchanged, takes_over: None }
    }
}

/// What came of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Yes,
    /// Not written: the schedule is suspended.
    Suspended,
    /// Not written: another condition did not hold.
    Refused,
}

/// How long a schedule's attempts may take, and by when a missed occurrence still runs: written with the registration,
/// so that any process can tell the schedule's health (fleet.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// An attempt's `timeout`.
    pub timeout: Option<Duration>,
    /// An attempt running longer is stuck (`maxRuntime`).
    pub max_runtime: Option<Duration>,
    pub starting_deadline: Duration,
    /// Its occurrences start up to this long after their tick (`jitter`).
    pub jitter: Duration,
}

impl Limits {
    /// The state's fields and values that say them (`timeout`, `maxRuntime`: empty when none; `startingDeadline`,
    /// `jitter`).
    pub fn fields(&self) -> [(&'static str, String); 4] {
        let ms = |d: Option<Duration>| d.map_or_else(String::new, |d| d.as_millis().to_string());
        [
            ("timeout", ms(self.timeout)),
            ("maxRuntime", ms(self.max_runtime)),
            ("startingDeadline", self.starting_deadline.as_millis().to_string()),
            ("jitter", self.jitter.as_millis().to_string()),
        ]
    }

    /// The limits a schedule's state says (none for what it does not: a registration of an earlier version).
    pub fn of(state: &std::collections::HashMap<String, String>) -> Self {
        let ms = |name: &str| state.get(name).and_then(|v| v.parse().ok()).map(Duration::from_millis);
        Self {
            timeout: ms("timeout"),
            max_runtime: ms("maxRuntime"),
            starting_deadline: ms("startingDeadline").unwrap_or_default(),
            jitter: ms("jitter").unwrap_or_default(),
        }
    }
}

/// A schedule's state, as a replica reads it when it registers: what scripts/schedule_register.lua answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The server's time, in epoch ms.
    pub now: i64,
    /// When the schedule was first registered (server ms).
    pub since: i64,
    /// The newest tick a look back settled (see [`CatchUp`]).
    pub last: Option<i64>,
    pub suspended: bool,
    /// Open attempts due for a look.
    pub due: i64,
    /// Manual runs waiting.
    pub triggers: i64,
    /// Running attempts of ticks before this give way (`replace`).
    pub replace: Option<i64>,
    /// In how many ms the next open attempt is due for a look (its lease over, or its retry due).
    pub due_in: Option<i64>,
    /// For each tick the registration looked at, whether it has a record.
    pub recorded: Vec<bool>,
}

/// The registration script's reply: `{now, since, last, suspended, due, triggers, replace, due_in, recorded}`.
pub type RegisteredReply = (i64, i64, i64, i64, i64, i64, i64, i64, Vec<i64>);

impl Registered {
    /// The registration script's `reply` for `ticks` ticks looked at, read; `None` when it answered for others.
    pub fn of(reply: RegisteredReply, ticks: usize) -> Option<Self> {
        let (now, since, last, suspended, due, triggers, replace, due_in, recorded) = reply;
        if recorded.len() != ticks {
            return None;
        }
        let known = |n: i64| (n >= 0).then_some(n);
        let recorded = recorded.into_iter().map(|r| r == 1).collect();
        Some(Self {
            now,
            since,
            last: known(last),
            suspended: suspended == 1,
            due,
            triggers,
            replace: known(replace),
            due_in: known(due_in),
            recorded,
        })
    }
}

/// A schedule as scripts/schedule_read.lua finds it.
#[derive(Debug, Clone, Default)]
pub struct ScheduleRead {
    /// Its state's fields (see [`ScheduleKeys::state`]).
    pub state: std::collections::HashMap<String, String>,
    /// Instances whose registration has not expired.
    pub replicas: Vec<String>,
    /// The newest records first.
    pub records: Vec<Record>,
    /// The records of the attempts running or waiting for a retry.
    pub open: Vec<Record>,
}

/// The read script's reply: the state's fields and values in turn, the replicas, the newest records and the open ones
/// (JSON).
pub type ScheduleReadReply = (Vec<String>, Vec<String>, Vec<Option<String>>, Vec<Option<String>>);

impl ScheduleRead {
    /// The read script's `reply`, read (records that are not, say of a later version, are left out).
    pub fn of((fields, replicas, records, open): ScheduleReadReply) -> Self {
        let state = fields.chunks(2).filter_map(|pair| Some((pair.first()?.clone(), pair.get(1)?.clone()))).collect();
        let parsed =
            |jsons: Vec<Option<String>>| jsons.iter().flatten().filter_map(|json| Record::from_json(json)).collect();
        Self { state, replicas, records: parsed(records), open: parsed(open) }
    }
}

/// `message` as a record keeps it: at most [`MAX_ERROR_CHARS`] characters.
pub fn error_message(message: &str) -> String {
    match message.char_indices().nth(MAX_ERROR_CHARS) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

/// The delay before attempt `next` (2 or more) after a failure: `base` doubled for each attempt after the second,
/// times `jitter` (a factor the caller draws from 0.8 to 1.2), at most an hour.
pub fn retry_delay(base: Duration, next: u32, jitter: f64) -> Duration {
    let doublings = next.saturating_sub(2).min(30);
    base.saturating_mul(1 << doublings).mul_f64(jitter.clamp(0.0, 2.0)).min(Duration::from_secs(3600))
}

/// The most attempts of one occurrence: its first, `retries` after failures, and re-runs after its runner died, of
/// which there are at least two (a runner that keeps dying, a poison job, stops there).
pub fn max_attempts(retries: u32) -> u32 {
    (retries + 1).max(3)
}

/// When each occurrence of a schedule starts (`jitter`): its tick plus an offset below the schedule's jitter, the same
/// on every replica (a hash of the schedule's name and the tick), so that schedules sharing a tick spread their starts.
/// The occurrence stays its tick (its record, its claim); only its start moves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Jitter {
    /// The offsets are below this many ms (0: none).
    max_ms: u64,
    /// The hash of the schedule's name.
    seed: u64,
}

impl Jitter {
    /// No jitter: every occurrence starts at its tick.
    pub const NONE: Self = Self { max_ms: 0, seed: 0 };

    /// The jitter of schedule `name` with offsets below `max`.
    pub fn new(name: &str, max: Duration) -> Self {
        // FNV-1a: stable across platforms and versions, as every replica must compute the same offsets.
        let seed = name
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
        Self { max_ms: u64::try_from(max.as_millis()).unwrap_or(u64::MAX), seed }
    }

    /// The offsets' bound.
    pub fn max(&self) -> Duration {
        Duration::from_millis(self.max_ms)
    }

    /// The offset of the occurrence of `tick`, in ms: from 0 to below the bound.
    pub fn offset(&self, tick: i64) -> i64 {
        if self.max_ms == 0 {
            return 0;
        }
        // splitmix64's finalizer of the name's hash and the tick.
        let mut z = self.seed ^ (tick as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % self.max_ms) as i64
    }

    /// When the occurrence of `tick` starts, in epoch ms.
    pub fn start(&self, tick: i64) -> i64 {
        tick.saturating_add(self.offset(tick))
    }
}

/// The most past occurrences one look back considers: older ones are neither run late nor recorded.
pub const MAX_LOOK_BACK: usize = 1000;

/// What to do about a schedule's past occurrences that no replica recorded. Given the ticks since the last look (in
/// order, up to now, each with whether it has a record), those whose start (the tick plus its [`Jitter`] offset) is
/// older than `grace` (left to their on-time run) and unrecorded are missed: the latest of them runs late if it is the
/// newest occurrence of all and can still start within `window` of its start, and is recorded missed (`deadline`) if it is the newest but cannot; every other one is
/// recorded missed (`superseded`: a later occurrence ran, or runs, instead). While the newest occurrence is
/// unrecorded and within its grace, it is not known yet whether it runs on time: the older ones are superseded
/// either way, and it is looked at again once its grace is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    /// The tick to run late.
    pub late: Option<i64>,
    /// The ticks to record missed, with the reason.
    pub missed: Vec<(i64, &'static str)>,
    /// The newest tick looked at for good (older than `grace`): the next look starts after it.
    pub settled: Option<i64>,
}

impl CatchUp {
    /// See [`CatchUp`]; `now` in epoch ms.
    pub fn plan(ticks: &[(i64, bool)], now: i64, grace: Duration, window: Duration, jitter: Jitter) -> Self {
        let settled_before = now - grace.as_millis() as i64;
        let settled = ticks.iter().map(|&(tick, _)| tick).filter(|&tick| jitter.start(tick) <= settled_before).max();
        let unrecorded: Vec<i64> = ticks
            .iter()
            .filter(|&&(tick, recorded)| !recorded && jitter.start(tick) <= settled_before)
            .map(|&(tick, _)| tick)
            .collect();
        let Some((&latest, older)) = unrecorded.split_last() else {
            return Self { late: None, missed: vec![], settled };
        };
        let mut missed: Vec<(i64, &'static str)> = older.iter().map(|&tick| (tick, "superseded")).collect();
        let later = ticks.iter().any(|&(tick, _)| tick > latest);
        let late = if later {
            missed.push((latest, "superseded"));
            None
        } else if now - jitter.start(latest) <= window.as_millis() as i64 {
            Some(latest)
        } else {
            missed.push((latest, "deadline"));
            None
        };
        Self { late, missed, settled }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_named_as_its_record_says_it() {
        for status in Status::ENDED.into_iter().chain([Status::Running]) {
            assert_eq!(serde_json::to_string(&status).unwrap(), format!("\"{}\"", status.as_str()));
        }
    }

    #[test]
    fn an_attempt_is_named_by_its_tick_kind_and_number() {
        for (attempt, id) in [
            (Attempt::first(1_700_000_000_000), "1700000000000"),
            (Attempt::first(7).next(), "7:2"),
            (Attempt { tick: 7, manual: true, attempt: 1 }, "7m"),
            (Attempt { tick: 7, manual: true, attempt: 3 }, "7m:3"),
        ] {
            assert_eq!(attempt.id(), id);
            assert_eq!(Attempt::parse(id), Some(attempt));
        }
        for bad in ["", "x", "7:1", "7:x", "m", "7mm"] {
            assert_eq!(Attempt::parse(bad), None, "{bad}");
        }
        assert!(Attempt::first(7).next().score() > Attempt::first(7).score());
        assert!(Attempt::first(8).score() > Attempt::first(7).next().next().score());
    }

    #[test]
    fn a_schedules_names_share_the_run_locks_slot() {
        for one_slot in [false, true] {
            let keys = ScheduleKeys::new("snatch:", "report", one_slot).unwrap();
            assert_eq!(keys.run.lock, "snatch:report");
            assert_eq!(keys.state, "{snatch:report}:state");
            assert_eq!(keys.control, "{snatch:report}:control");
            let claim = keys.claim(&Attempt::first(7));
            assert_eq!(claim.fence, keys.run.fence);
            assert_eq!(claim.lock, format!("{}7", keys.claims()));
            for name in
                [&keys.state, &keys.history, &keys.records, &keys.open, &keys.replicas, &keys.triggers, &claim.lock]
            {
                if one_slot {
                    assert_eq!(crate::keys::slot(name), keys.run.slot(), "{name}");
                }
            }
        }
        let tagged = ScheduleKeys::new("{app}:", "report", true).unwrap();
        assert_eq!(tagged.state, "{app}:report:state");
        for (prefix, name, one_slot) in [("snatch:", "a:b", false), ("snatch:", "a", true), ("{app}:", "r", true)] {
            let keys = ScheduleKeys::new(prefix, name, one_slot).unwrap();
            assert_eq!(ScheduleKeys::name_of_state(prefix, &keys.state, one_slot).as_deref(), Some(name));
        }
        assert_eq!(ScheduleKeys::name_of_state("snatch:", "{other:a}:state", false), None);
        assert_eq!(ScheduleKeys::name_of_state("snatch:", "{snatch:a}:replicas", false), None);
    }

    #[test]
    fn records_read_back_as_written() {
        let mut record = Record::missed(Attempt::first(7), Why::OnTime, "overlap");
        assert_eq!(Record::from_json(&record.to_json()), Some(record.clone()));
        record.outcome = Status::Failed;
        record.error = Some(error_message(&"é".repeat(MAX_ERROR_CHARS + 5)));
        assert_eq!(record.error.as_ref().unwrap().chars().count(), MAX_ERROR_CHARS + 1);
        assert!(record.to_json().contains(r#""outcome":"failed""#));
        assert!(record.to_json().contains(r#""why":"on-time""#));
        for why in [Why::OnTime, Why::Late, Why::Retry, Why::Manual] {
            assert_eq!(serde_json::to_string(&why).unwrap(), format!("\"{}\"", why.as_str()));
        }
        assert_eq!(Record::from_json("{"), None);
    }

    #[test]
    fn retries_back_off_and_attempts_are_bounded() {
        let base = Duration::from_millis(1000);
        assert_eq!(retry_delay(base, 2, 1.0), base);
        assert_eq!(retry_delay(base, 4, 1.0), base * 4);
        assert_eq!(retry_delay(base, 2, 1.2), base.mul_f64(1.2));
        assert_eq!(retry_delay(base, 60, 1.0), Duration::from_secs(3600));
        assert_eq!((max_attempts(0), max_attempts(5)), (3, 6));
    }

    #[test]
    fn only_the_latest_missed_tick_runs_late_and_only_within_the_window() {
        let (grace, window) = (Duration::from_millis(5), Duration::from_millis(100));
        let plan = |ticks: &[(i64, bool)]| CatchUp::plan(ticks, 1000, grace, window, Jitter::default());
        assert_eq!(plan(&[]), CatchUp { late: None, missed: vec![], settled: None });
        assert_eq!(
            plan(&[(10, false), (20, true), (950, false)]),
            CatchUp { late: Some(950), missed: vec![(10, "superseded")], settled: Some(950) }
        );
        assert_eq!(
            plan(&[(10, false), (800, false)]),
            CatchUp { late: None, missed: vec![(10, "superseded"), (800, "deadline")], settled: Some(800) }
        );
        // A later occurrence ran (it has a record): the missed one does not run late.
        assert_eq!(
            plan(&[(950, false), (990, true)]),
            CatchUp { late: None, missed: vec![(950, "superseded")], settled: Some(990) }
        );
        // Within its grace, the newest is left to its on-time run: not missed, not settled, and whether it runs on
        // time or late, the older ones are superseded.
        assert_eq!(
            plan(&[(950, false), (998, false)]),
            CatchUp { late: None, missed: vec![(950, "superseded")], settled: Some(950) }
        );
        assert_eq!(plan(&[(998, false)]), CatchUp { late: None, missed: vec![], settled: None });
    }

    #[test]
    fn with_jitter_an_occurrence_is_missed_and_late_from_its_start_not_its_tick() {
        let (grace, window) = (Duration::from_millis(5), Duration::from_millis(100));
        let jitter = Jitter::new("digest", Duration::from_millis(500));
        let tick = (0..).map(|n| n * 10).find(|&t| (200..400).contains(&jitter.offset(t))).unwrap();
        let start = jitter.start(tick);
        let plan = |now| CatchUp::plan(&[(tick, false)], now, grace, window, jitter);
        assert_eq!(plan(start + 4), CatchUp { late: None, missed: vec![], settled: None }, "left to its start");
        assert_eq!(plan(start + 50), CatchUp { late: Some(tick), missed: vec![], settled: Some(tick) });
        assert_eq!(plan(start + 101).missed, vec![(tick, "deadline")]);
    }

    #[test]
    fn a_jitter_offset_is_below_the_bound_the_same_for_a_name_and_tick_and_spreads_over_names() {
        let max = Duration::from_millis(60_000);
        assert_eq!(Jitter::new("a", Duration::ZERO).offset(123), 0);
        let tick = 1_767_254_400_000;
        let offsets: Vec<i64> = (0..10_000).map(|n| Jitter::new(&format!("user:{n}"), max).offset(tick)).collect();
        assert!(offsets.iter().all(|&o| (0..60_000).contains(&o)));
        assert_eq!(Jitter::new("user:7", max).offset(tick), offsets[7], "every replica computes the same");
        // Spread: each tenth of the bound gets close to its tenth of the schedules.
        for decile in 0..10 {
            let n = offsets.iter().filter(|&&o| o / 6_000 == decile).count();
            assert!((850..1150).contains(&n), "decile {decile}: {n}");
        }
        // And over the ticks of one schedule.
        let one = Jitter::new("digest", max);
        let distinct: std::collections::BTreeSet<i64> =
            (0..100).map(|day| one.offset(tick + day * 86_400_000)).collect();
        assert!(distinct.len() > 90);
        // A pinned value: the offsets must not change across versions while replicas of both run.
        assert_eq!(Jitter::new("digest", max).offset(tick), Jitter::new("digest", max).offset(tick));
    }
}
