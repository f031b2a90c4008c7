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
    fn globs_are_escaped_and_slots_have_keys() {
        assert_eq!(glob_literal("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:");
        for wanted in [0, 1, 8000, SLOTS - 1] {
            let key = key_in_slot("snatch:", wanted);
            assert_eq!(slot(&key), wanted);
            assert!(key.starts_with("{snatch:"), "{key}");
        }
    }
}
