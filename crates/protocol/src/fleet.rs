//! What the fleet-wide view tells (`schedules()`, `locks()`), as the caller gets it (JSON; times in epoch ms, fences
//! as strings), and the names a scan of a deployment's keys goes by.

use crate::keys::{has_hash_tag, slot, SLOTS};
use crate::schedule::{Limits, Record, Status};
use serde::Serialize;

/// A schedule as replicas registered it (live ones now, or none any more: `orphaned`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleInfo {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    /// The instances of the live replicas that registered it.
    pub replicas: Vec<String>,
    pub suspended: bool,
    /// Its next occurrence, in epoch ms.
    pub next: Option<i64>,
    /// Its next occurrences (up to [`UPCOMING`]), in epoch ms.
    pub upcoming: Vec<i64>,
    /// The attempts running now.
    pub running: Vec<Record>,
    /// The newest record of an attempt that is not running.
    pub last: Option<Record>,
    /// When its newest attempt that ran ok ended, in epoch ms (its record written, on the server's clock).
    pub last_success: Option<i64>,
    /// How its records read came out: how many of them are ok, failed (failed, timeout, lost, crashed) and missed.
    pub recent: Recent,
    pub health: Health,
}

/// How many of a schedule's newest records came to what.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Recent {
    /// How many records were read (the newest of those Redis keeps).
    pub records: usize,
    pub ok: usize,
    /// Failed, timed out, lost or crashed.
    pub failed: usize,
    pub missed: usize,
}

impl Recent {
    /// The counts of `records`.
    pub fn of(records: &[Record]) -> Self {
        let count = |f: &dyn Fn(Status) -> bool| records.iter().filter(|r| f(r.outcome)).count();
        Self {
            records: records.len(),
            ok: count(&|o| o == Status::Ok),
            failed: count(&|o| matches!(o, Status::Failed | Status::Timeout | Status::Lost | Status::Crashed)),
            missed: count(&|o| o == Status::Missed),
        }
    }
}

/// Whether a schedule does what it is for, as its records, its limits and its registrations tell (the first that
/// holds, in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    /// No live replica registers it any more, while its state and records remain: the deploy that dropped it, or
    /// every replica gone.
    Orphaned,
    /// An attempt has been running past its `timeout`, or past `maxRuntime`.
    Stuck,
    /// An occurrence's `startingDeadline` passed without a run: its newest occurrence that is over was recorded missed
    /// (not while suspended), or none recorded the occurrence due after the newest one recorded.
    Missed,
    /// Its newest occurrence that is over failed, timed out, lost its lease or crashed.
    Failing,
    Ok,
}

/// How long after an occurrence's starting deadline a replica has recorded it, run or missed, in ms (their look back
/// settles ticks within seconds of it): past this, an occurrence nobody recorded was missed.
pub const RECORD_SLACK_MS: i64 = 30_000;

/// What a schedule's health is told from.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// How many live replicas register it.
    pub replicas: usize,
    pub suspended: bool,
    pub limits: Limits,
    /// The attempts running now.
    pub running: &'a [Record],
    /// The newest record of an attempt that is not running.
    pub last: Option<&'a Record>,
    /// The first occurrence after the newest one recorded (or after its first registration), in epoch ms.
    pub unrecorded: Option<i64>,
}

impl Health {
    /// Every health, as the caller hears them (`as_str`), best first.
    pub const ALL: [Self; 5] = [Self::Ok, Self::Failing, Self::Missed, Self::Stuck, Self::Orphaned];

    /// Its name, as the caller hears it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orphaned => "orphaned",
            Self::Stuck => "stuck",
            Self::Missed => "missed",
            Self::Failing => "failing",
            Self::Ok => "ok",
        }
    }

    /// The health of the schedule `observed` at `now` (epoch ms).
    pub fn of(observed: &Observed, now: i64) -> Self {
        if observed.replicas == 0 {
            return Self::Orphaned;
        }
        let Observed { limits, running, last, .. } = *observed;
        if let Some(limit) = limits.timeout.or(limits.max_runtime) {
            let limit = limit.as_millis() as i64;
            if running.iter().any(|r| r.started.is_some_and(|started| now - started > limit)) {
                return Self::Stuck;
            }
        }
        // With jitter an occurrence starts up to that long after its tick, and its deadline counts from its start.
        let deadline = (limits.starting_deadline + limits.jitter).as_millis() as i64 + RECORD_SLACK_MS;
        if !observed.suspended && observed.unrecorded.is_some_and(|tick| now - tick > deadline) {
            return Self::Missed;
        }
        match last {
            Some(r) if r.outcome == Status::Missed && r.reason.as_deref() != Some("suspended") => Self::Missed,
            Some(r) if matches!(r.outcome, Status::Failed | Status::Timeout | Status::Lost | Status::Crashed) => {
                Self::Failing
            }
            _ => Self::Ok,
        }
    }
}

/// A lock held now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldLock {
    /// Its name, as given to `lock()` (without the prefix).
    pub key: String,
    /// The instance that holds it, when it says.
    pub holder: Option<String>,
    /// The lease left, in ms.
    pub ttl: i64,
    pub fence: String,
}

/// A semaphore with permits held now (the dashboard's view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldSemaphore {
    /// Its name, as given to `semaphore()` (without the prefix).
    pub key: String,
    /// The permits held, not expired.
    pub holders: i64,
    /// Its limit, as its last acquisition gave it (`None` once that is gone).
    pub limit: Option<i64>,
    /// Until its last permit expires, in ms.
    pub ttl: i64,
}

/// How many of a schedule's next occurrences [`ScheduleInfo::upcoming`] lists.
pub const UPCOMING: usize = 3;

/// The deployment a locker talks to, as its servers answer now (the dashboard's connection panel).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// `server`, `redlock`, `cluster`, `sentinel` or `memory`.
    pub kind: &'static str,
    /// Each server the locker writes to (one for a cluster: the node that answered; none for `memory`).
    pub servers: Vec<Server>,
}

/// One server of a [`Deployment`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    /// Its URL, the password replaced by `***`.
    pub name: String,
    /// `Redis 7.0.15`, `Valkey 9.1.2`; `None` when its `INFO` does not say.
    pub version: Option<String>,
    /// The round trip of a `PING`, in ms.
    pub latency_ms: f64,
}

/// The server and version that `INFO server` text names: Valkey's own version when it gives one (it also answers a
/// Redis version, for clients that check it), else Redis's.
pub fn server_version(info: &str) -> Option<String> {
    let field = |name: &str| {
        info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_owned())
    };
    match (field("valkey_version"), field("redis_version")) {
        (Some(valkey), _) => Some(format!("Valkey {valkey}")),
        (None, Some(redis)) => Some(format!("Redis {redis}")),
        (None, None) => None,
    }
}

/// `text` with the characters a `SCAN MATCH` glob gives a meaning to escaped, to match only itself.
pub fn glob_literal(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// A key in cluster slot `slot` that a user limited to keys under `prefix` may name (a call that names it goes to the
/// master that serves the slot): `{<prefix><n>}`, or `<prefix>{<n>}` when `prefix` holds a `}` (which would close the
/// first form's hash tag inside the prefix, in one slot whatever `n`). `None` when `prefix` has a hash tag of its own:
/// every key under it is in that tag's slot.
pub fn key_in_slot(prefix: &str, slot_wanted: u16) -> Option<String> {
    if has_hash_tag(prefix) {
        return None;
    }
    let key = |n: u32| if prefix.contains('}') { format!("{prefix}{{{n}}}") } else { format!("{{{prefix}{n}}}") };
    // The hash tag holds `n`, so the keys' slots go round them all.
    (0u32..).map(key).find(|key| slot(key) == slot_wanted % SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_health_is_named_as_the_fleet_s_answer_says_it() {
        for health in Health::ALL {
            assert_eq!(serde_json::to_string(&health).unwrap(), format!("\"{}\"", health.as_str()));
        }
    }

    #[test]
    fn server_version_names_valkey_before_the_redis_version_it_also_answers() {
        assert_eq!(server_version("# Server\r\nredis_version:7.0.15\r\n").as_deref(), Some("Redis 7.0.15"));
        let valkey = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(server_version(valkey).as_deref(), Some("Valkey 9.1.2"));
        assert_eq!(server_version("# Server\r\n"), None);
    }

    #[test]
    fn globs_are_escaped_and_slots_have_keys() {
        assert_eq!(glob_literal("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:");
        for wanted in [0, 1, 8000, SLOTS - 1] {
            let key = key_in_slot("snatch:", wanted).unwrap();
            assert_eq!(slot(&key), wanted);
            assert!(key.starts_with("{snatch:"), "{key}");
            // A `}` in the prefix, or an unclosed `{`: still every slot, and the key starts with the prefix.
            for prefix in ["a}b:", "a{b:", "}"] {
                let key = key_in_slot(prefix, wanted).unwrap();
                assert_eq!(slot(&key), wanted, "{key}");
                assert!(key.starts_with(prefix) || key.starts_with(&format!("{{{prefix}")), "{key}");
            }
        }
        // A prefix with a hash tag of its own puts every key in one slot: no key for another.
        assert_eq!(key_in_slot("{app}:", 0), None);
    }

    #[test]
    fn health_is_the_first_that_holds() {
        use crate::schedule::{Attempt, Why};
        use std::time::Duration;
        let record = |outcome, reason: Option<&str>| {
            let mut r = Record::missed(Attempt::first(0), Why::OnTime, reason.unwrap_or("x"));
            r.outcome = outcome;
            r.reason = reason.map(str::to_owned);
            r.started = Some(1_000);
            r
        };
        let limits = Limits {
            timeout: Some(Duration::from_secs(10)),
            starting_deadline: Duration::from_secs(60),
            ..Limits::default()
        };
        let ok = record(Status::Ok, None);
        let running = [record(Status::Running, None)];
        let seen = Observed { replicas: 1, suspended: false, limits, running: &[], last: Some(&ok), unrecorded: None };
        let health = |observed: Observed, now| Health::of(&observed, now);
        assert_eq!(health(Observed { replicas: 0, ..seen }, 5_000), Health::Orphaned);
        assert_eq!(health(Observed { running: &running, ..seen }, 12_000), Health::Stuck);
        assert_eq!(health(Observed { running: &running, ..seen }, 5_000), Health::Ok);
        let unlimited = Observed { running: &running, limits: Limits::default(), ..seen };
        assert_eq!(health(unlimited, 99_000_000), Health::Ok, "no limit, never stuck");
        let missed = record(Status::Missed, Some("deadline"));
        assert_eq!(health(Observed { last: Some(&missed), ..seen }, 5_000), Health::Missed);
        let suspended = record(Status::Missed, Some("suspended"));
        assert_eq!(health(Observed { last: Some(&suspended), ..seen }, 5_000), Health::Ok);
        for failing in [Status::Failed, Status::Timeout, Status::Lost, Status::Crashed] {
            assert_eq!(health(Observed { last: Some(&record(failing, None)), ..seen }, 5_000), Health::Failing);
        }
        // An occurrence nobody recorded: missed once its deadline and the slack have passed, unless suspended.
        let due = Observed { unrecorded: Some(100_000), ..seen };
        assert_eq!(health(due, 100_000 + 60_000 + RECORD_SLACK_MS), Health::Ok);
        assert_eq!(health(due, 100_001 + 60_000 + RECORD_SLACK_MS), Health::Missed);
        assert_eq!(health(Observed { suspended: true, ..due }, 10_000_000), Health::Ok);
        // With jitter, its start (and so its deadline) comes up to the jitter later.
        let jittered = Limits { jitter: Duration::from_secs(30), ..limits };
        assert_eq!(health(Observed { limits: jittered, ..due }, 100_001 + 60_000 + RECORD_SLACK_MS), Health::Ok);
        assert_eq!(health(Observed { limits: jittered, ..due }, 100_001 + 90_000 + RECORD_SLACK_MS), Health::Missed);
        let counts = Recent::of(&[ok.clone(), missed, record(Status::Crashed, None), ok]);
        assert_eq!(counts, Recent { records: 4, ok: 2, failed: 1, missed: 1 });
    }
}
