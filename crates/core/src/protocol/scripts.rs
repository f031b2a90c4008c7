//! The Lua scripts, each written once, and the call of one of them. Calls are sent as EVALSHA; the batcher sends a
//! call the server has no script for again as EVAL (which also caches the script there).

use crate::protocol::acquisition;
use redis::{Arg, Cmd, Script, ToRedisArgs};
use std::borrow::Cow;
use std::sync::LazyLock;

/// A Lua script: its source, and its SHA1 for EVALSHA.
pub(crate) struct Lua {
    source: Cow<'static, str>,
    script: Script,
}

impl Lua {
    fn new(source: impl Into<Cow<'static, str>>) -> Self {
        let source = source.into();
        Self { script: Script::new(&source), source }
    }

    /// The script's SHA1, as EVALSHA names it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// The script's source.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }
}

/// Acquire or refresh a lock: the commands of [`acquisition::COMMANDS`] (as the Lua function `take` that
/// [`acquisition::lua`] writes), then what only a script can do.
///
/// KEYS: lock key, fence key. ARGV: token, ttl in ms, the fence counter's ttl in ms, then optionally `'1'` to have
/// the holder named and `'1'` to mark a held lock as waited for. The fence counter goes up on every call. The fence
/// (≥ 0) when the lock is ours: the counter, when the lock was free (now ours) or held with our token (its lease
/// is refreshed: a call made again with its token, say after a reply was lost, is safe). Else `-2 - pttl` of the
/// holder (< 0; pttl is -1 for a key without expiry), or when named `{-2 - pttl, holder's token}`. One integer
/// unless the holder is named (a table reply costs Redis about a tenth more per call, and only Redlock needs the
/// name). Either way the counter is kept for its ttl from now; one below [`crate::lock::keys::CLOCK_FLOOR`] (new, or
/// from before counters expired) is first raised to the server clock's microseconds, so fences keep rising across
/// its expiry. Direct acquisitions send only [`acquisition::COMMANDS`], as a transaction (direct/calls.rs), and
/// have this script raise a counter they find below the floor.
///
/// A waited-for lock holds its token followed by `*`, which has [`RELEASE`] wake the waiters: a release that no one
/// waits for publishes nothing (bench/README.md, profile step 24).
pub(crate) static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(acquisition::lua() + include_str!("scripts/fence.lua") + include_str!("scripts/acquire.lua"))
});

/// Raise a fence counter to a fence a Redlock majority gave (see redlock/quorum.rs).
///
/// KEYS: fence key. ARGV: the fence, the counter's ttl in ms. A counter below the fence is set to it; returns 1.
pub(crate) static RAISE_FENCE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/raise_fence.lua")));

/// Set the lease of a lock we own: extension, and the minHold release (the key stays for the remainder).
///
/// KEYS: lock key. ARGV: token, ttl in ms. Returns 1 when the key was ours (waited for or not), else 0.
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/extend.lua")));

/// Delete locks we own (compare-and-delete) and wake their waiters, if any (see [`ACQUIRE`]).
///
/// KEYS: lock key, for each lock. ARGV: token, for each lock (the channel to wake waiters on is derived from the
/// key, as [`crate::lock::keys::LockKeys::channel`]). For each lock 1 when the key was ours, else 0: one integer for
/// one lock, an array of them for several, where a lock whose work failed has its error. One call for several locks
/// costs Redis less per lock than a call each (bench/README.md, profile step 19).
pub(crate) static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/release.lua")));

/// What Redis holds for a lock: `inspect`, for dashboards and debugging.
///
/// KEYS: lock key, fence key. Returns `{pttl, fence}`: the lock key's lease left in ms (-2 when free) and the fence
/// counter's value (nil when it has none).
pub(crate) static INSPECT: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/inspect.lua")));

/// Delete a lock whoever holds it and wake its waiters: `forceRelease`, an operator's tool.
///
/// KEYS: lock key. Returns 1 when there was a lock, else 0.
pub(crate) static FORCE_RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/force_release.lua")));

/// Take a permit of a semaphore: [`ACQUIRE`] for a key that `limit` may hold at once.
///
/// KEYS: the semaphore (a sorted set of its holders' tokens, scored by when each permit expires on the server's
/// clock), its fence key. ARGV: token, ttl in ms, the fence counter's ttl in ms, the limit. Permits expired on the
/// server's clock are dropped first. The fence (a new one each time, raised like [`ACQUIRE`]'s) when the permit is
/// ours, else `-2 - ms` until the first permit expires.
pub(crate) static PERMIT_ACQUIRE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(concat!(include_str!("scripts/fence.lua"), include_str!("scripts/permit_acquire.lua"))));

/// Set the expiry of a permit we hold ([`EXTEND`] for a semaphore).
///
/// KEYS: the semaphore. ARGV: token, ttl in ms. Returns 1 when the permit was ours and had not expired, else 0.
pub(crate) static PERMIT_EXTEND: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("scripts/permit_extend.lua")));

/// Give back a permit we hold and wake the semaphore's waiters ([`RELEASE`] for a semaphore, one at a time).
///
/// KEYS: the semaphore. ARGV: token. Returns 1 when the permit was ours and had not expired, else 0.
pub(crate) static PERMIT_RELEASE: LazyLock<Lua> =
    LazyLock::new(|| Lua::new(include_str!("scripts/permit_release.lua")));

/// One call of a script: its EVALSHA command, and the script, for when the server does not have it.
pub(crate) struct ScriptCall {
    pub(crate) script: &'static Lua,
    pub(crate) cmd: Cmd,
}

impl ScriptCall {
    /// `EVALSHA <sha> <keys>`; add the keys, then the arguments, with [`ScriptCall::arg`].
    pub(crate) fn new(script: &'static Lua, keys: usize) -> Self {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}

/// `evalsha`, a call of `script`, as `EVAL <source> …` with the same keys and arguments.
pub(crate) fn as_eval(evalsha: &Cmd, script: &Lua) -> Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(script.source());
    for arg in evalsha.args_iter().skip(2) {
        if let Arg::Simple(bytes) = arg {
            eval.arg(bytes);
        }
    }
    eval
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acquire_script_raises_counters_below_the_same_floor() {
        let literal = format!("if f < {} then", crate::lock::keys::CLOCK_FLOOR);
        assert!(ACQUIRE.source().contains(&literal), "acquire.lua has `{literal}`");
    }

    #[test]
    fn a_call_as_eval_keeps_its_keys_and_arguments() {
        let mut call = ScriptCall::new(&RELEASE, 1);
        call.arg("lock").arg("token");
        let eval = as_eval(&call.cmd, &RELEASE);
        let mut expected = redis::cmd("EVAL");
        expected.arg(RELEASE.source()).arg(1).arg("lock").arg("token");
        assert_eq!(eval.get_packed_command(), expected.get_packed_command());
    }
}
