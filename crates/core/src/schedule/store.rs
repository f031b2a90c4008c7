//! What a schedule keeps in Redis beside its locks (snatch-protocol's schedule.rs names it): its state, its records,
//! its open attempts, its replicas' registrations and its pending manual runs, through the schedule scripts. On
//! Redlock every node gets every write, a write counts when a majority made it, and a read takes the first node that
//! answers: the claims on a majority keep each attempt to one replica, and these records tell what happened.

use crate::lock::locker::Locker;
use crate::server::node::Node;
use crate::server::script_call::ScriptCall;
use snatch_protocol::schedule::{
    Attempt, Conditions, Found, Limits, Open, Record, Registered, ScheduleKeys, ScheduleRead, Write, Written,
};
use snatch_protocol::schedule_loop::LookBack;
use snatch_protocol::scripts::{
    Script, CLUSTER, SCHEDULE_CONTROL, SCHEDULE_END, SCHEDULE_LEAVE, SCHEDULE_READ, SCHEDULE_RECORD, SCHEDULE_REGISTER,
    SCHEDULE_SWEEP, SCHEDULE_TAKE_TRIGGER,
};
use snatch_protocol::SnatchError;
use std::time::Duration;

/// How long a replica's registration lasts without being renewed (three heartbeats): a dead replica's is gone within
/// it.
pub(crate) const REGISTRATION: Duration = Duration::from_secs(15);

/// What the registration of a code schedule answers when a stored schedule has its name (scripts/schedule_register.lua).
pub(crate) const STORED_NAME: &str = "STORED_NAME";

/// How many open attempts one look takes at most.
const SWEEP_BATCH: u32 = 20;

/// What a replica registers of a schedule.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) instance: String,
    pub(crate) cron: String,
    pub(crate) timezone: String,
    pub(crate) limits: Limits,
    /// How long the state and records are kept after the last write or registration.
    pub(crate) keep: Duration,
}

/// Registers `registration` of the schedule of `keys` (or renews it; with `refresh`, its expression and its keys'
/// TTLs too), has it look back at `look`'s ticks, and reads its state.
pub(crate) async fn register(
    locker: &Locker,
    keys: &ScheduleKeys,
    registration: &Registration,
    look: &LookBack,
    refresh: bool,
) -> Result<Registered, SnatchError> {
    let mut call = ScriptCall::new(&SCHEDULE_REGISTER, 6);
    call.arg(&keys.state).arg(&keys.replicas).arg(&keys.triggers).arg(&keys.history).arg(&keys.records).arg(&keys.open);
    call.arg(&registration.instance).arg(millis(REGISTRATION)).arg(millis(registration.keep));
    call.arg(&registration.cron).arg(&registration.timezone).arg(look.settled.unwrap_or(-1)).arg(u8::from(refresh));
    for (field, value) in registration.limits.fields() {
        call.arg(field).arg(value);
    }
    for &tick in &look.ticks {
        call.arg(Attempt::first(tick).id());
    }
    let registered = Registered::of(locker.nodes().first(call).await?, look.ticks.len());
    registered
        .ok_or_else(|| SnatchError::Redis { cause: "the schedule's registration answered for other ticks".into() })
}

/// Writes `write`'s record of the schedule of `keys`, which keeps `history` records for `keep` (`stored`: a stored
/// schedule's, written only while it is stored; `held`: the locks, key and owner, it is written only while they are
/// still held, in the same script).
pub(crate) async fn record(
    locker: &Locker,
    keys: &ScheduleKeys,
    write: &Write,
    history: u32,
    keep: Duration,
    stored: bool,
    held: &[(&str, &str)],
) -> Result<Written, SnatchError> {
    let call = record_call(&SCHEDULE_RECORD, keys, write, (history, keep), stored, held, &[]);
    let answers: Vec<i64> = locker.nodes().every(call).await?;
    let quorum = locker.nodes().quorum();
    if answers.len() < quorum {
        return Err(SnatchError::Quorum {
            failures: vec!["the record reached fewer than a majority of the nodes".into()],
        });
    }
    Ok(if answers.iter().filter(|&&a| a == 1).count() >= quorum {
        Written::Yes
    } else if answers.contains(&0) {
        Written::Suspended
    } else {
        Written::Refused
    })
}

/// Writes `write`'s record of an attempt's end, as [`record`] does, and gives back the locks `releases` (key, owner)
/// after it, whether it was written or not: one call to `node`, the one Redis that holds them all.
pub(crate) async fn record_end(
    node: &Node,
    keys: &ScheduleKeys,
    write: &Write,
    history: u32,
    keep: Duration,
    stored: bool,
    releases: &[(String, String)],
) -> Result<Written, SnatchError> {
    let releases: Vec<(&str, &str)> = releases.iter().map(|(key, owner)| (key.as_str(), owner.as_str())).collect();
    let mut call = record_call(&SCHEDULE_END, keys, write, (history, keep), stored, &releases, &[]);
    call.arg(if node.is_cluster() { CLUSTER } else { "0" });
    Ok(written(node.invoke(call).await?))
}

/// What one node's answer to a record says.
pub(crate) fn written(answer: i64) -> Written {
    match answer {
        1 => Written::Yes,
        0 => Written::Suspended,
        _ => Written::Refused,
    }
}

/// The call of `script`, which writes `write`'s record as scripts/schedule_record.lua does (the schedule of `keys`
/// keeping `history` records for `keep`; `stored`: a stored schedule's): the schedule's four keys, the keys of `locks`
/// (key, owner) and then the keys `beside`, the record's arguments, then the locks' owners.
pub(crate) fn record_call(
    script: &'static Script,
    keys: &ScheduleKeys,
    write: &Write,
    (history, keep): (u32, Duration),
    stored: bool,
    locks: &[(&str, &str)],
    beside: &[&str],
) -> ScriptCall {
    let mut call = ScriptCall::new(script, 4 + locks.len() + beside.len());
    call.arg(&keys.state).arg(&keys.history).arg(&keys.records).arg(&keys.open);
    for (key, _) in locks {
        call.arg(key);
    }
    for key in beside {
        call.arg(key);
    }
    let Conditions { unless_suspended, only_new, over_missed, only_running, holds_buffer: _ } = write.conditions;
    let flags = [(unless_suspended, 's'), (only_new, 'n'), (over_missed, 'm'), (only_running, 'r'), (stored, 'x')];
    let conditions: String = flags.iter().filter(|c| c.0).map(|c| c.1).collect();
    let attempt = write.record.attempt();
    call.arg(conditions).arg(attempt.id());
    call.arg(write.record.to_json()).arg(attempt.score());
    match write.open {
        Open::Unchanged => call.arg(""),
        Open::Closed => call.arg("-"),
        Open::LookIn(after) => call.arg(millis(after)),
    };
    call.arg(history).arg(millis(keep));
    if let Some((was, becomes)) = &write.takes_over {
        call.arg(was.record.attempt().id()).arg(&was.json).arg(becomes.to_json());
    }
    for (_, owner) in locks {
        call.arg(owner);
    }
    call
}

/// The open attempts of the schedule of `keys` that need another: running while their claim is gone (their runner
/// died), or failed with a retry due. On Redlock, those a majority of the nodes tells. And when to look again.
pub(crate) async fn sweep(locker: &Locker, keys: &ScheduleKeys) -> Result<Swept, SnatchError> {
    let mut call = ScriptCall::new(&SCHEDULE_SWEEP, 2);
    call.arg(&keys.open).arg(&keys.records).arg(keys.claims()).arg(SWEEP_BATCH);
    let answers: Vec<(Vec<String>, i64)> = locker.nodes().every(call).await?;
    let again = answers.iter().filter_map(|&(_, ms)| u64::try_from(ms).ok()).min().map(Duration::from_millis);
    let mut told: Vec<(String, usize)> = Vec::new();
    for json in answers.into_iter().flat_map(|(found, _)| found) {
        match told.iter_mut().find(|(seen, _)| *seen == json) {
            Some((_, count)) => *count += 1,
            None => told.push((json, 1)),
        }
    }
    let quorum = locker.nodes().quorum();
    let found = told
        .into_iter()
        .filter(|(_, count)| *count >= quorum)
        .filter_map(|(json, _)| Some(Found { record: Record::from_json(&json)?, json }))
        .collect();
    Ok(Swept { found, again })
}

/// What a look at a schedule's open attempts found.
#[derive(Debug, Default)]
pub(crate) struct Swept {
    /// The open attempts that need another.
    pub(crate) found: Vec<Found>,
    /// When the soonest claim of a running one lapses unless renewed: when to look again.
    pub(crate) again: Option<Duration>,
}

/// The schedule of `keys`: its state, its live replicas, its newest `limit` records and its open ones.
pub(crate) async fn read(locker: &Locker, keys: &ScheduleKeys, limit: u32) -> Result<ScheduleRead, SnatchError> {
    let mut call = ScriptCall::new(&SCHEDULE_READ, 5);
    call.arg(&keys.state).arg(&keys.replicas).arg(&keys.history).arg(&keys.records).arg(&keys.open);
    call.arg(limit.max(1));
    Ok(ScheduleRead::of(locker.nodes().first(call).await?))
}

/// What [`control`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Control {
    Suspend,
    Resume,
    /// Queue a manual run, when a live replica registered the schedule.
    Trigger,
    /// Running attempts of ticks before this give way.
    Replace(i64),
    /// The replicas look at the open attempts now: one was interrupted (its replica shuts down) and is due.
    HandOver,
}

/// Steers the schedule of `keys` (the replicas hear of it on its control channel), whose state is kept at least
/// `keep`: how many live replicas registered it (for a stored schedule, `live`: its handler's runners), and the
/// server's time (a manual run's tick).
pub(crate) async fn control(
    locker: &Locker,
    keys: &ScheduleKeys,
    control: Control,
    keep: Duration,
    live: Option<usize>,
) -> Result<(i64, i64), SnatchError> {
    let (action, value) = match control {
        Control::Suspend => ("suspend", 0),
        Control::Resume => ("resume", 0),
        Control::Trigger => ("trigger", 0),
        Control::Replace(tick) => ("replace", tick),
        Control::HandOver => ("handover", 0),
    };
    let mut call = ScriptCall::new(&SCHEDULE_CONTROL, 3);
    call.arg(&keys.state).arg(&keys.replicas).arg(&keys.triggers);
    call.arg(action).arg(&keys.control).arg(millis(keep)).arg(value);
    call.arg(if locker.one_slot() { CLUSTER } else { "0" });
    if let Some(live) = live {
        call.arg(live);
    }
    if let Control::Trigger = control {
        // One manual run, queued once: on the first node that answers.
        return locker.nodes().first(call).await;
    }
    let answers: Vec<(i64, i64)> = locker.nodes().every(call).await?;
    Ok(answers.into_iter().max().unwrap_or_default())
}

/// Takes the oldest manual run asked for of the schedule of `keys` (each is taken by one replica only): its tick.
pub(crate) async fn take_trigger(locker: &Locker, keys: &ScheduleKeys) -> Result<Option<i64>, SnatchError> {
    let mut call = ScriptCall::new(&SCHEDULE_TAKE_TRIGGER, 1);
    call.arg(&keys.triggers);
    let taken: Option<String> = locker.nodes().first(call).await?;
    Ok(taken.and_then(|tick| tick.parse().ok()))
}

/// Takes `instance`'s registration of the schedule of `keys` away (the replica stopped running it).
pub(crate) async fn leave(locker: &Locker, keys: &ScheduleKeys, instance: &str) -> Result<(), SnatchError> {
    let mut call = ScriptCall::new(&SCHEDULE_LEAVE, 1);
    call.arg(&keys.replicas).arg(instance);
    locker.nodes().every::<i64>(call).await.map(drop)
}

/// `duration` in whole milliseconds.
fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}
