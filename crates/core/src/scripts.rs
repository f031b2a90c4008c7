//! The Lua scripts, each written once, and the call of one of them. Calls are sent as EVALSHA; the batcher loads
//! a script the server does not have and sends the call again.

use redis::{Cmd, Script, ToRedisArgs};
use std::sync::LazyLock;

/// Acquire or refresh a lock.
///
/// KEYS: lock key, fence key. ARGV: token, ttl in ms, then optionally `'1'` to have the holder named and `'1'` to
/// mark a held lock as waited for. The fence (≥ 0) when the lock is ours (a new acquisition increments the fence
/// counter; a holder asking again with its own token refreshes its lease and keeps its fence), else `-2 - pttl` of
/// the holder (< 0; pttl is -1 for a key without expiry), or when named `{-2 - pttl, holder's token}`. One integer
/// unless the holder is named (a table reply costs Redis about a tenth more per call, and only Redlock needs the
/// name). Direct acquisitions do the same in a transaction instead (direct.rs).
///
/// A waited-for lock holds its token followed by `*`, which has [`RELEASE`] wake the waiters: a release that no one
/// waits for publishes nothing (bench/README.md, profile step 24).
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));

/// Set the lease of a lock we own: extension, and the minHold release (the key stays for the remainder).
///
/// KEYS: lock key. ARGV: token, ttl in ms. Returns 1 when the key was ours (waited for or not), else 0.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));

/// Delete locks we own (compare-and-delete) and wake their waiters, if any (see [`ACQUIRE`]).
///
/// KEYS: lock key, for each lock. ARGV: token, for each lock (the channel to wake waiters on is derived from the
/// key, as [`crate::keys::LockKeys::channel`]). For each lock 1 when the key was ours, else 0: one integer for one
/// lock, an array of them for several, where a lock whose work failed has its error. One call for several locks
/// costs Redis less per lock than a call each (bench/README.md, profile step 19).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(release_source()));

/// The release script's source, which direct calls (direct.rs) load when their socket is opened.
pub(crate) fn release_source() -> &'static str {
    include_str!("scripts/release.lua")
}

/// One call of a script: its EVALSHA command, and the script, for when the server has to load it.
pub(crate) struct ScriptCall {
    pub(crate) script: &'static Script,
    pub(crate) cmd: Cmd,
}

impl ScriptCall {
    /// `EVALSHA <sha> <keys>`; add the keys, then the arguments, with [`ScriptCall::arg`].
    pub(crate) fn new(script: &'static Script, keys: usize) -> Self {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}
