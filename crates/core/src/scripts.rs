//! The Lua scripts, each written once. `redis::Script` sends EVALSHA and falls back to EVAL on NOSCRIPT.

use redis::Script;
use std::sync::LazyLock;

/// Acquire or refresh a lock.
///
/// KEYS: lock key, fence key. ARGV: token, ttl in ms.
/// Returns `{1, fence}` when the lock is ours (a new acquisition increments the fence counter; a holder asking again
/// with its own token refreshes its lease and keeps its fence), else `{0, pttl of the holder}`.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Set the lease of a lock we own: extension, and the minHold release (the key stays for the remainder).
///
/// KEYS: lock key. ARGV: token, ttl in ms. Returns 1 when the key was ours, else 0.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));

/// Delete a lock we own (compare-and-delete) and wake its waiters.
///
/// KEYS: lock key. ARGV: token, release channel. Returns 1 when the key was ours, else 0.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));
