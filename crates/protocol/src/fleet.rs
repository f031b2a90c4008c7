//! What the fleet-wide view tells (`schedules()`, `locks()`), as the caller gets it (JSON; times in epoch ms, fences
//! as strings), and the names a scan of a deployment's keys goes by.

use crate::keys::{slot, SLOTS};
use crate::schedule::Record;
use serde::Serialize;

/// A schedule as its live replicas registered it.
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

/// A key in cluster slot `slot` that a user limited to keys under `prefix` may name, `{<prefix><n>}` (a call that
/// names it goes to the master that serves the slot).
pub fn key_in_slot(prefix: &str, slot_wanted: u16) -> String {
    (0u32..)
        .map(|n| format!("{{{prefix}{n}}}"))
        .find(|key| slot(key) == slot_wanted % SLOTS)
        .expect("every slot has a key of this form")
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let key = key_in_slot("snatch:", wanted);
            assert_eq!(slot(&key), wanted);
            assert!(key.starts_with("{snatch:"), "{key}");
        }
    }
}
