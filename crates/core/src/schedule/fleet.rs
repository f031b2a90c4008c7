//! The fleet-wide view and control of schedules and locks, from any process (none needs a schedule registered here):
//! every schedule a live replica registered, a schedule's records, suspend and resume, a manual run, the locks held.

use crate::config::{is_memory, Topology};
use crate::direct::open::slot_ranges;
use crate::lock::locker::Locker;
use crate::schedule::cron::CronSchedule;
use crate::schedule::store::{self, Control};
use crate::schedule::stored;
use crate::server::node::Node;
use crate::server::script_call::ScriptCall;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use snatch_protocol::direct::target::{ClusterMap, DirectTarget};
use snatch_protocol::fleet::{
    glob_literal, key_in_slot, Deployment, Health, HeldLock, HeldSemaphore, Observed, Recent, ScheduleInfo, UPCOMING,
};
use snatch_protocol::keys::{has_hash_tag, LockKeys};
use snatch_protocol::schedule::{Attempt, Limits, Record, ScheduleKeys, Status};
use snatch_protocol::scripts::{SCAN, SEMAPHORE_READ};
use snatch_protocol::SnatchError;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// How long the state of a schedule that `suspend` or `resume` finds unregistered is kept: a week, as a registered
/// one's after its last replica is gone.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// Keys one step of a scan looks at, at most.
const SCAN_COUNT: u32 = 1000;

/// How many records `history()` reads when no `limit` is given.
pub const DEFAULT_HISTORY_LIMIT: u32 = 50;

/// How many locks (or semaphores) `locks()` lists when no `limit` is given.
pub const DEFAULT_LIST_LIMIT: u32 = 1000;

/// What the fleet is asked.
#[derive(Debug, Clone)]
pub enum FleetRequest {
    /// Every schedule a replica registered (orphaned ones too, while their state is kept).
    Schedules,
    /// Schedule `name`'s newest `limit` records.
    History {
        name: String,
        limit: u32,
    },
    Suspend(String),
    Resume(String),
    /// One run of `name` now, on one live replica that registered it.
    Trigger(String),
    /// Up to `limit` locks held now whose names match the glob `pattern`.
    Locks {
        pattern: String,
        limit: u32,
    },
    /// The deployment: its kind, and each server's version and latency.
    Deployment,
    /// Up to `limit` semaphores with permits held now whose names match the glob `pattern`.
    Semaphores {
        pattern: String,
        limit: u32,
    },
}

/// Answers `request`, as JSON: the schedules ([`ScheduleInfo`]), the records (newest first), `null` (suspend,
/// resume), `{"tick": ms}` (a manual run), the locks ([`HeldLock`]), the deployment ([`Deployment`]), or the
/// semaphores ([`HeldSemaphore`]).
pub async fn answer(locker: &Locker, request: FleetRequest) -> Result<String, SnatchError> {
    let _busy = locker.enter()?;
    let json = match request {
        FleetRequest::Schedules => serde_json::to_string(&schedules(locker).await?),
        FleetRequest::History { name, limit } => {
            serde_json::to_string(&store::read(locker, &keys(locker, &name)?, limit).await?.records)
        }
        FleetRequest::Suspend(name) => control(locker, &name, Control::Suspend).await.map(|_| Ok("null".into()))?,
        FleetRequest::Resume(name) => control(locker, &name, Control::Resume).await.map(|_| Ok("null".into()))?,
        FleetRequest::Trigger(name) => match stored::trigger(locker, &name).await? {
            Some(tick) => Ok(format!(r#"{{"tick":{tick}}}"#)),
            None => match control(locker, &name, Control::Trigger).await? {
                (0, _) => return Err(SnatchError::NoReplica { schedule: name }),
                (_, tick) => Ok(format!(r#"{{"tick":{tick}}}"#)),
            },
        },
        FleetRequest::Locks { pattern, limit } => serde_json::to_string(&locks(locker, &pattern, limit).await?),
        FleetRequest::Deployment => serde_json::to_string(&deployment(locker).await?),
        FleetRequest::Semaphores { pattern, limit } => {
            serde_json::to_string(&semaphores(locker, &pattern, limit).await?)
        }
    };
    json.map_err(|e| SnatchError::Redis { cause: format!("could not write the answer: {e}") })
}

/// The names of schedule `name`.
fn keys(locker: &Locker, name: &str) -> Result<ScheduleKeys, SnatchError> {
    ScheduleKeys::new(&locker.config().prefix, name, locker.one_slot())
}

async fn control(locker: &Locker, name: &str, control: Control) -> Result<(i64, i64), SnatchError> {
    store::control(locker, &keys(locker, name)?, control, KEEP, None).await
}

/// Every schedule a replica registered (orphaned ones too), by name.
async fn schedules(locker: &Locker) -> Result<Vec<ScheduleInfo>, SnatchError> {
    let names = scheduled(locker).await?;
    let infos = join_all(names.iter().map(|name| schedule(locker, name))).await;
    let mut infos: Vec<ScheduleInfo> =
        infos.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect();
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(infos)
}

/// How many of a schedule's newest records `schedules()` reads (its last success, its recent counts).
const RECENT: u32 = 50;

/// Schedule `name` as replicas registered it; `None` when its state is gone (it expired meanwhile).
async fn schedule(locker: &Locker, name: &str) -> Result<Option<ScheduleInfo>, SnatchError> {
    let read = store::read(locker, &keys(locker, name)?, RECENT).await?;
    // A stored schedule's state holds its spec: listSchedules shows those.
    if read.state.is_empty() || read.state.contains_key("spec") {
        return Ok(None);
    }
    let field = |name: &str| read.state.get(name).cloned().unwrap_or_default();
    let (cron, timezone) = (field("cron"), field("timezone"));
    let upcoming: Vec<i64> = match CronSchedule::new(&cron, &timezone, Utc::now()) {
        Ok(schedule) => std::iter::successors(schedule.next_after(Utc::now()), |after| schedule.next_after(*after))
            .take(UPCOMING)
            .map(|next| next.timestamp_millis())
            .collect(),
        Err(_) => Vec::new(),
    };
    let next = upcoming.first().copied();
    let running: Vec<Record> = read.open.iter().filter(|r| r.outcome == Status::Running).cloned().collect();
    let last = read.records.iter().find(|r| r.outcome != Status::Running).cloned();
    let last_success = last_success(&read.state, &read.records);
    let suspended = read.state.contains_key("suspended");
    let observed = Observed {
        replicas: read.replicas.len(),
        suspended,
        limits: Limits::of(&read.state),
        running: &running,
        last: last.as_ref(),
        unrecorded: unrecorded(&cron, &timezone, &read.state, &read.records),
    };
    let health = Health::of(&observed, Utc::now().timestamp_millis());
    Ok(Some(ScheduleInfo {
        name: name.to_owned(),
        cron,
        timezone,
        recent: Recent::of(&read.records),
        replicas: read.replicas,
        suspended,
        next,
        upcoming,
        running,
        last,
        last_success,
        health,
    }))
}

/// When the schedule's newest ok attempt ended, in epoch ms: as its state says, or (a state an earlier version wrote)
/// as the newest ok record among `records` says.
fn last_success(state: &HashMap<String, String>, records: &[Record]) -> Option<i64> {
    state.get("lastSuccess").and_then(|v| v.parse().ok()).or_else(|| {
        let ok = records.iter().find(|r| r.outcome == Status::Ok)?;
        Some(ok.started? + ok.duration_ms.unwrap_or(0.0) as i64)
    })
}

/// The first occurrence of `cron` in `timezone` after the newest tick recorded among `records` (or after the schedule's
/// first registration, which `state` says), in epoch ms.
fn unrecorded(cron: &str, timezone: &str, state: &HashMap<String, String>, records: &[Record]) -> Option<i64> {
    let since = state.get("since").and_then(|v| v.parse::<i64>().ok())?;
    let newest = records.iter().filter(|r| !r.manual).map(|r| r.tick).fold(since, i64::max);
    let after = DateTime::<Utc>::from_timestamp_millis(newest)?;
    let schedule = CronSchedule::new(cron, timezone, after).ok()?;
    schedule.next_after(after).map(|tick| tick.timestamp_millis())
}

/// The names of the schedules under the locker's prefix that a replica registered (live or not: their state is kept a
/// week after the last one went), found by a scan.
async fn scheduled(locker: &Locker) -> Result<Vec<String>, SnatchError> {
    let prefix = &locker.config().prefix;
    let one_slot = locker.one_slot();
    let mut found = BTreeSet::new();
    for node in locker.nodes().all() {
        for route in routes(node, prefix).await? {
            scan(node, &route, &Scan { glob: "*:state", kind: "hash", keep: Owned::Any }, usize::MAX, &mut found)
                .await?;
        }
    }
    Ok(found.iter().filter_map(|key| ScheduleKeys::name_of_state(prefix, key, one_slot)).collect())
}

/// Up to `limit` locks held now under the locker's prefix whose names match `pattern`, by name: every node of
/// Redlock, each master of a cluster scanned.
async fn locks(locker: &Locker, pattern: &str, limit: u32) -> Result<Vec<HeldLock>, SnatchError> {
    let prefix = &locker.config().prefix;
    let glob = [glob_literal(prefix), pattern.to_owned()].concat();
    let mut found = BTreeSet::new();
    for node in locker.nodes().all() {
        for route in routes(node, prefix).await? {
            scan(node, &route, &Scan { glob: &glob, kind: "string", keep: Owned::Locks }, limit as usize, &mut found)
                .await?;
        }
    }
    let names: Vec<String> = found
        .iter()
        .filter_map(|key| key.strip_prefix(prefix.as_str()))
        .take(limit as usize)
        .map(str::to_owned)
        .collect();
    // A schedule's claim shares its run lock's fence counter.
    let schedules = scheduled(locker).await?;
    let keys = names
        .iter()
        .map(|name| {
            let claim = schedules.iter().find_map(|schedule| {
                let attempt = Attempt::parse(name.strip_prefix(schedule.as_str())?.strip_prefix(':')?)?;
                Some(keys(locker, schedule).ok()?.claim(&attempt))
            });
            claim.map_or_else(|| LockKeys::new(prefix, name, locker.one_slot()), Ok)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let inspections = join_all(keys.iter().map(|keys| locker.inspect_keys(keys))).await;
    let mut locks = Vec::new();
    for (key, inspection) in names.into_iter().zip(inspections) {
        if let Some(held) = inspection? {
            locks.push(HeldLock { key, holder: held.holder, ttl: held.ttl_ms, fence: held.fence.to_string() });
        }
    }
    Ok(locks)
}

/// Up to `limit` semaphores with permits held now under the locker's prefix whose names match `pattern`, by name
/// (each master of a cluster scanned; not Redlock, which has no semaphores).
async fn semaphores(locker: &Locker, pattern: &str, limit: u32) -> Result<Vec<HeldSemaphore>, SnatchError> {
    let Some(node) = locker.nodes().single() else { return Ok(Vec::new()) };
    let prefix = &locker.config().prefix;
    let glob = [glob_literal(prefix), pattern.to_owned()].concat();
    let mut found = BTreeSet::new();
    for route in routes(node, prefix).await? {
        scan(node, &route, &Scan { glob: &glob, kind: "zset", keep: Owned::Semaphores }, limit as usize, &mut found)
            .await?;
    }
    let names: Vec<&str> =
        found.iter().filter_map(|key| key.strip_prefix(prefix.as_str())).take(limit as usize).collect();
    let reads = join_all(names.iter().map(|name| async move {
        let keys = LockKeys::new(prefix, name, locker.one_slot())?;
        let mut call = ScriptCall::new(&SEMAPHORE_READ, 2);
        call.arg(&keys.lock).arg(keys.limit_key(locker.one_slot()));
        node.invoke::<(i64, Option<i64>, i64)>(call).await
    }))
    .await;
    let mut semaphores = Vec::new();
    for (name, read) in names.into_iter().zip(reads) {
        let (holders, limit, ttl) = read?;
        if holders > 0 {
            semaphores.push(HeldSemaphore { key: name.to_owned(), holders, limit, ttl });
        }
    }
    Ok(semaphores)
}

/// The deployment the locker talks to, each of its servers asked for its version and timed on a `PING`.
async fn deployment(locker: &Locker) -> Result<Deployment, SnatchError> {
    let config = locker.config();
    let nodes = locker.nodes().all();
    let kind = match &config.topology {
        Topology::Cluster => "cluster",
        Topology::Sentinel { .. } => "sentinel",
        Topology::Servers if config.urls.iter().any(|url| is_memory(url)) => "memory",
        Topology::Servers if nodes.len() > 1 => "redlock",
        Topology::Servers => "server",
    };
    if kind == "memory" {
        return Ok(Deployment { kind, servers: Vec::new() });
    }
    let servers = join_all(nodes.iter().map(Node::answering_server)).await.into_iter().collect::<Result<_, _>>()?;
    Ok(Deployment { kind, servers })
}

/// A key under `prefix` for each server of `node` that routes a scan there: one per master on a cluster, unless
/// `prefix` has a hash tag of its own (every key under it is then in that tag's slot: one master holds them all).
async fn routes(node: &Node, prefix: &str) -> Result<Vec<String>, SnatchError> {
    if node.cluster().is_none() || has_hash_tag(prefix) {
        return Ok(vec![[prefix, "0"].concat()]);
    }
    let map = ClusterMap::new(slot_ranges(&node.cluster_slots().await?));
    Ok((0..map.masters.len())
        .filter_map(|index| match map.target(index) {
            DirectTarget::Master { slot, .. } => key_in_slot(prefix, slot),
            DirectTarget::Server => None,
        })
        .collect())
}

/// What a scan looks for: keys matching `glob` of type `kind`, of which those `keep` says.
struct Scan<'a> {
    glob: &'a str,
    kind: &'a str,
    keep: Owned,
}

/// Which keys a scan keeps (scan.lua's last argument).
#[derive(Clone, Copy)]
enum Owned {
    /// Every key found.
    Any = 0,
    /// String keys whose value is a lock's owner.
    Locks = 1,
    /// Sorted sets whose first member is one: semaphores.
    Semaphores = 2,
}

/// Scans the server that `route` leads to for `scan`'s keys, into `found`, until it holds `limit`.
async fn scan(
    node: &Node,
    route: &str,
    scan: &Scan<'_>,
    limit: usize,
    found: &mut BTreeSet<String>,
) -> Result<(), SnatchError> {
    let mut cursor = "0".to_owned();
    loop {
        let mut call = ScriptCall::new(&SCAN, 1);
        call.arg(route).arg(&cursor).arg(scan.glob).arg(SCAN_COUNT).arg(scan.kind).arg(scan.keep as u8);
        let (next, keys): (String, Vec<String>) = node.invoke(call).await?;
        found.extend(keys);
        if next == "0" || found.len() >= limit {
            return Ok(());
        }
        cursor = next;
    }
}
