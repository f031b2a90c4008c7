//! What the fleet-wide view tells (`schedules()`, `locks()`), as the caller gets it (JSON; times in epoch ms, fences
//! as strings), and the names a scan of a deployment's keys goes by.

use crate::keys::{has_hash_tag, slot, SLOTS};
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
}
