//! The Lua scripts, each written once: their sources (scripts/*.lua, and the acquisition's commands that
//! acquisition.rs writes as Lua) and their SHA1, as EVALSHA names them. The main connection calls them by EVALSHA
//! (snatch-core's server/batcher.rs sends a call the server has no script for again as EVAL), the direct connection
//! calls [`RELEASE`] and [`ACQUIRE`] (and runs [`CLOCK`] when it opens), and `memory://` runs their sources in-process.

use crate::acquisition;
use crate::keys::{Kind, LockKeys};
use std::sync::LazyLock;

/// A Lua script: its source, and its SHA1 for EVALSHA.
#[derive(Debug)]
pub struct Script {
    source: String,
    hash: String,
}

impl Script {
    fn new(source: String) -> Self {
        let hash = sha1_smol::Sha1::from(&source).digest().to_string();
        Self { source, hash }
    }

    /// The script's SHA1 in lowercase hex, as EVALSHA names it.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The script's source.
    pub fn source(&self) -> &str {
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
/// holder (< 0; pttl is -1 for a key without expiry), or when named `{-2 - pttl, holder's token}`. One integer unless
/// the holder is named (a table reply costs Redis about a tenth more per call, and only Redlock needs the name). Either way the counter is kept for its ttl from now; one
/// below [`crate::keys::CLOCK_FLOOR`] (new, or from before counters expired) is first raised to the server clock's
/// microseconds, so fences keep rising across its expiry. Direct acquisitions send only [`acquisition::COMMANDS`]
/// (without the counter's `PEXPIRE` while their locker kept it lately), and have this script raise a counter they
/// find below the floor.
///
/// A waited-for lock holds its token followed by `*`, which has [`RELEASE`] wake the waiters: a release that no one
/// waits for publishes nothing (bench/README.md, profile step 24).
///
/// A fair waiter adds KEYS: the queue and the places ([`crate::keys::LockKeys::queue`]), and ARGV (after `'0'` and
/// `'1'`): its id and how long its place lasts in ms. It takes the lock only when first in the queue
/// (scripts/queue.lua), else gets `-2 - ms` until the first one's place would lapse.
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        acquisition::lua()
            + include_str!("scripts/fence.lua")
            + include_str!("scripts/queue.lua")
            + include_str!("scripts/acquire.lua"),
    )
});

/// Acquire two locks in one attempt each, the second only once the first is taken: a schedule's attempt, its claim and
/// its run lock, in one call where one Redis holds both (see scripts/acquire_pair.lua).
///
/// KEYS: the first lock, its fence counter, the second lock, its fence counter. ARGV: the two tokens, the lease in ms,
/// the counters' ttl in ms, `1` to keep the counters (`0`: kept lately). Returns `{first}` or `{first, second}`, each
/// as [`ACQUIRE`] answers.
pub static ACQUIRE_PAIR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(acquisition::lua() + include_str!("scripts/fence.lua") + include_str!("scripts/acquire_pair.lua"))
});

/// A fair waiter gives up its place in a lock's or a semaphore's queue, and wakes the next one if it was first.
///
/// KEYS: the queue, the places, the lock (or the semaphore). ARGV: the waiter's id, then [`CLUSTER`] on a Redis
/// Cluster. Returns 1.
pub static QUEUE_LEAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/wake.lua"),
            include_str!("scripts/queue.lua"),
            include_str!("scripts/queue_leave.lua")
        )
        .to_owned(),
    )
});

/// Raise a fence counter to a fence a Redlock majority gave (see snatch-core's redlock/quorum.rs).
///
/// KEYS: fence key. ARGV: the fence, the counter's ttl in ms. A counter below the fence is set to it; returns 1.
pub static RAISE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/raise_fence.lua").to_owned()));

/// Set the lease of a lock we own: extension, and the minHold release (the key stays for the remainder).
///
/// KEYS: lock key. ARGV: token, ttl in ms. Returns 1 when the key was ours (waited for or not), else 0.
pub static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua").to_owned()));

/// Continue a lock handed over by another owner (`Lock.handoff()`, `Locker.adopt()`): the key holds the new owner from
/// now on, so the old one can neither extend nor release it, and the handle cannot be adopted twice.
///
/// KEYS: lock key. ARGV: the handed-over token (an owner's first [`crate::owner::TOKEN_LEN`] digits), the new owner,
/// the ttl in ms. Returns 1 when the key held that token (waited for or not), else 0.
pub static ADOPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/adopt.lua").to_owned()));

/// Read a shared result (`locker.shared`): KEYS: its key. Returns the entry, or nil.
pub static SHARED_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/shared_read.lua").to_owned()));

/// Store a shared result while its lock is ours. KEYS: the lock, the result. ARGV: the owner, the entry, its ttl in
/// ms. Returns 1 when stored, 0 when the lock is not ours (then nothing is).
pub static SHARED_STORE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/shared_store.lua").to_owned()));

/// A leader's term begins (the term kept beside its lock for a while) or ends, and its observers are told on the
/// leader channel (see lead.rs). KEYS: the term key. ARGV: the channel, the term ([`crate::lead::term`], or '' when
/// it ends), its ttl in ms, then [`CLUSTER`] on a Redis Cluster. Returns 1.
pub static LEADER_NOTE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/wake.lua"), include_str!("scripts/leader_note.lua")).to_owned())
});

/// Who leads (see lead.rs). KEYS: the leader's lock, its term key. Returns `{value, pttl, term}`, '' for what is not
/// there.
pub static LEADER_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/leader_read.lua").to_owned()));

/// The argument that tells the scripts that wake waiters (wake.lua) that they run on a Redis Cluster: there, on Redis
/// 7 or newer, they publish on sharded channels (`SPUBLISH`), which reach only the nodes of the channel's shard.
pub const CLUSTER: &str = "1";

/// Delete locks we own (compare-and-delete) and wake their waiters, if any (see [`ACQUIRE`]).
///
/// KEYS: lock key, for each lock. ARGV: token, for each lock, then [`CLUSTER`] on a Redis Cluster (the channel to
/// wake waiters on is derived from the key, as [`crate::keys::LockKeys::channel`], and sharded on a cluster of Redis
/// 7 or newer: wake.lua), with the id of the lock's first fair waiter, if any, as the message. For each lock 1 when
/// the key was ours, else 0: one integer for one lock, an array of them for several, where a lock whose work failed
/// has its error. One call for several locks costs Redis less per lock
/// than a call each (bench/README.md, profile step 19).
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/release_unwaited.lua"),
            include_str!("scripts/wake.lua"),
            include_str!("scripts/release_lock.lua"),
            include_str!("scripts/release.lua")
        )
        .to_owned(),
    )
});

/// What Redis holds for a lock: `inspect`, for dashboards and debugging.
///
/// KEYS: lock key, fence key. Returns `{pttl, fence, owner}`: the lock key's lease left in ms (-2 when free), the fence
/// counter's value (nil when it has none), and what the lock key holds (nil when free, or for a semaphore).
pub static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/inspect.lua").to_owned()));

/// Delete a lock whoever holds it and wake its waiters: `forceRelease`, an operator's tool.
///
/// KEYS: lock key. ARGV: [`CLUSTER`] on a Redis Cluster. Returns 1 when there was a lock, else 0.
pub static FORCE_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/wake.lua"), include_str!("scripts/force_release.lua")).to_owned())
});

/// Take a permit of a semaphore: [`ACQUIRE`] for a key that `limit` may hold at once.
///
/// KEYS: the semaphore (a sorted set of its holders' tokens, scored by when each permit expires on the server's
/// clock), its fence key, its limit key ([`crate::keys::LockKeys::limit_key`]). ARGV: token, ttl in ms, the fence
/// counter's ttl in ms, the limit. Permits expired on the
/// server's clock are dropped first. The fence (a new one each time, raised like [`ACQUIRE`]'s) when the permit is
/// ours, else `-2 - ms` until the first permit expires. A fair waiter adds the queue and the places to KEYS, and its
/// id, how long its place lasts and [`CLUSTER`] (or `'0'`) to ARGV, as for [`ACQUIRE`]; taking a permit with one left,
/// it wakes the next waiter.
pub static PERMIT_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/fence.lua"),
            include_str!("scripts/holders.lua"),
            include_str!("scripts/wake.lua"),
            include_str!("scripts/queue.lua"),
            include_str!("scripts/permit_acquire.lua")
        )
        .to_owned(),
    )
});

/// Set the expiry of a permit we hold ([`EXTEND`] for a semaphore).
///
/// KEYS: the semaphore. ARGV: token, ttl in ms. Returns 1 when the permit was ours and had not expired, else 0.
pub static PERMIT_EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/holders.lua"), include_str!("scripts/permit_extend.lua")).to_owned())
});

/// Give back a permit we hold and wake the semaphore's waiters ([`RELEASE`] for a semaphore, one at a time), or a read
/// lock, waking the read-write lock's waiters.
///
/// KEYS: the semaphore (or a read-write lock's readers), then a read-write lock's writer key, on whose channel its
/// waiters listen. ARGV: token, then [`CLUSTER`] on a Redis Cluster. Returns 1 when the permit was ours and had
/// not expired, else 0.
pub static PERMIT_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/wake.lua"), include_str!("scripts/permit_release.lua")).to_owned())
});

/// Take a read lock of a read-write lock: [`PERMIT_ACQUIRE`] without a limit, refused while a writer holds the lock or
/// waits for it.
///
/// KEYS: the readers (a sorted set, as a semaphore's holders: [`PERMIT_EXTEND`] and [`PERMIT_RELEASE`] keep it), the
/// fence key, the writer's key. ARGV: token, ttl in ms, the fence counter's ttl in ms, `'1'` when the caller waits
/// (a writer's release then wakes it). The fence when the read lock is ours, else `-2 - ms` until the writer's key
/// expires.
pub static READ_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/fence.lua"),
            include_str!("scripts/holders.lua"),
            include_str!("scripts/read_acquire.lua")
        )
        .to_owned(),
    )
});

/// Take the write lock of a read-write lock: [`ACQUIRE`]'s lock on the writer's key, once no reader holds it; a
/// writer that waits keeps new readers out meanwhile. Extended and released as a lock ([`EXTEND`], [`RELEASE`]).
///
/// KEYS: the writer's key, the fence key, the readers. ARGV: token, ttl in ms, the fence counter's ttl in ms, `'1'`
/// when the caller waits. The fence when the write lock is ours, else `-2 - ms` until the writer's key or the first
/// read lock expires.
pub static WRITE_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/fence.lua"), include_str!("scripts/write_acquire.lua")).to_owned())
});

/// Register (or renew) a replica's schedule and read its state: see scripts/schedule_register.lua.
pub static SCHEDULE_REGISTER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/schedule_register.lua").to_owned()));

/// Write the record of an attempt of an occurrence, on conditions: see scripts/schedule_record.lua.
pub static SCHEDULE_RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(include_str!("scripts/schedule_record.lua"), "return (write_record(#KEYS - 4, #ARGV))\n").to_owned(),
    )
});

/// Write the record of an attempt's end and give its locks back, in one call: see scripts/schedule_end.lua.
pub static SCHEDULE_END: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/wake.lua"),
            include_str!("scripts/release_lock.lua"),
            include_str!("scripts/schedule_record.lua"),
            include_str!("scripts/schedule_end.lua")
        )
        .to_owned(),
    )
});

/// Find the open attempts of a schedule that need another (a dead runner's, a due retry's): see
/// scripts/schedule_sweep.lua.
pub static SCHEDULE_SWEEP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/schedule_sweep.lua").to_owned()));

/// Read a schedule's state, live registrations, newest and open records: see scripts/schedule_read.lua.
pub static SCHEDULE_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/schedule_read.lua").to_owned()));

/// Suspend, resume, trigger or replace: see scripts/schedule_control.lua.
pub static SCHEDULE_CONTROL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/wake.lua"), include_str!("scripts/schedule_control.lua")).to_owned())
});

/// Read a stored schedule's state: see scripts/stored_state.lua.
pub static STORED_STATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/stored_spec.lua"), include_str!("scripts/stored_state.lua")).to_owned())
});

/// Store a stored schedule's spec, on the version read: see scripts/stored_write.lua.
pub static STORED_WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/stored_spec.lua"), include_str!("scripts/stored_write.lua")).to_owned())
});

/// A stored schedule's occurrence was dispatched: its next one, on the version read: see scripts/stored_advance.lua.
pub static STORED_ADVANCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/stored_advance.lua"),
            "return advance(KEYS, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])\n"
        )
        .to_owned(),
    )
});

/// The first record of a stored schedule's dispatched occurrence and its next tick, in one call: see
/// scripts/stored_first_record.lua.
pub static STORED_FIRST_RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        concat!(
            include_str!("scripts/schedule_record.lua"),
            include_str!("scripts/stored_advance.lua"),
            include_str!("scripts/stored_first_record.lua")
        )
        .to_owned(),
    )
});

/// Remove a stored schedule: see scripts/stored_remove.lua.
pub static STORED_REMOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/stored_spec.lua"), include_str!("scripts/stored_remove.lua")).to_owned())
});

/// Place a stored schedule in its bucket's due index, waking the runners when it is due soon: see
/// scripts/stored_place.lua.
pub static STORED_PLACE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(include_str!("scripts/wake.lua"), include_str!("scripts/stored_place.lua")).to_owned())
});

/// Take the due stored schedules of a handler in a bucket: see scripts/stored_take.lua.
pub static STORED_TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/stored_take.lua").to_owned()));

/// When the next stored schedule of each handler is due in a bucket: see scripts/stored_heads.lua.
pub static STORED_HEADS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/stored_heads.lua").to_owned()));

/// Register (or take away) a replica's handlers: see scripts/stored_runners.lua.
pub static STORED_RUNNERS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/stored_runners.lua").to_owned()));

/// How many stored schedules a handler has in a bucket, and how many are overdue: see scripts/stored_count.lua.
pub static STORED_COUNT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/stored_count.lua").to_owned()));

/// One page of a bucket's stored schedules: see scripts/stored_list.lua.
pub static STORED_LIST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/stored_list.lua").to_owned()));

/// A semaphore's holders, limit and time left, for the fleet's view: see scripts/semaphore_read.lua.
pub static SEMAPHORE_READ: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/semaphore_read.lua").to_owned()));

/// One step of a scan of a server's keys (`locks()`, `schedules()`): see scripts/scan.lua.
pub static SCAN: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/scan.lua").to_owned()));

/// Where the words of a script call go, each key and argument in order: the redis crate's command (snatch-core's
/// ScriptCall) or the direct connection's buffer. The calls that both make are written once, below.
pub trait Words {
    /// A key or an argument.
    fn word(&mut self, word: &str);
    /// A number, as its decimal digits.
    fn number(&mut self, n: u128);
}

/// How many keys a call of [`ACQUIRE`] for a lock names ([`acquire_words`]).
pub const ACQUIRE_KEYS: usize = 2;

/// The keys and arguments of a call of [`ACQUIRE`] that takes the lock of `values` (a plain lock, no fair waiter),
/// naming the holder when `name_holder`, with the waited-for mark `mark` (`0`: none, `1`: held, `2`: always).
pub fn acquire_words(words: &mut impl Words, values: &acquisition::Values<'_>, name_holder: bool, mark: u8) {
    words.word(values.lock);
    words.word(values.fence);
    words.word(values.token);
    words.number(values.ttl_ms);
    words.number(values.fence_ttl_ms);
    words.word(if name_holder { "1" } else { "0" });
    words.number(u128::from(mark));
}

/// The keys and arguments of a call of [`RELEASE`] that gives back the locks of `released` (each a key and its
/// owner's token; several in one call), on a Redis Cluster when `cluster`. The number of keys is `released`'s.
pub fn release_words<'a>(
    words: &mut impl Words,
    released: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    cluster: bool,
) {
    for (lock, _) in released.clone() {
        words.word(lock);
    }
    for (_, token) in released {
        words.word(token);
    }
    if cluster {
        words.word(CLUSTER);
    }
}

/// The script and the keys of a call that takes `keys` (a semaphore's permit, a read or the write lock of a
/// read-write lock: not a plain lock, nor a fair waiter's), as [`PERMIT_ACQUIRE`], [`READ_ACQUIRE`] and
/// [`WRITE_ACQUIRE`] take them: KEYS the lock's, its fence counter, and the semaphore's limit key, a read lock's writer
/// or the write lock's readers (`one_slot`: on a Redis Cluster). The arguments: [`held_acquire_args`].
pub fn held_acquire_keys<'a>(keys: &'a LockKeys, one_slot: bool) -> (&'static Script, [std::borrow::Cow<'a, str>; 3]) {
    use std::borrow::Cow;
    let (script, third): (&'static Script, Cow<'a, str>) = match &keys.kind {
        Kind::Semaphore(_) => (&PERMIT_ACQUIRE, Cow::Owned(keys.limit_key(one_slot))),
        Kind::Read { writer } => (&READ_ACQUIRE, Cow::Borrowed(writer.as_str())),
        Kind::Write { readers } => (&WRITE_ACQUIRE, Cow::Borrowed(readers.as_str())),
        Kind::Lock => unreachable!("a lock is taken by ACQUIRE (acquire_words)"),
    };
    (script, [Cow::Borrowed(keys.lock.as_str()), Cow::Borrowed(keys.fence.as_str()), third])
}

/// The arguments after [`held_acquire_keys`]' (and a fair waiter's queue and places): `token`, the lease and the fence
/// counter's ttl in ms; then a semaphore's limit, or for a read-write lock whether the caller waits (`waits`: a
/// writer's release then wakes it).
pub fn held_acquire_args(
    words: &mut impl Words,
    kind: &Kind,
    token: &str,
    ttl_ms: u128,
    fence_ttl_ms: u128,
    waits: bool,
) {
    words.word(token);
    words.number(ttl_ms);
    words.number(fence_ttl_ms);
    match kind {
        Kind::Semaphore(limit) => words.number(u128::from(*limit)),
        _ => words.number(u128::from(waits)),
    }
}

/// The script of a call that gives back `keys` (a semaphore's permit or a read lock: [`PERMIT_RELEASE`]; the write
/// lock: [`RELEASE`] on its key), and how many keys the call names ([`held_release_words`]).
pub fn held_release_script(keys: &LockKeys) -> (&'static Script, usize) {
    match &keys.kind {
        Kind::Read { .. } => (&PERMIT_RELEASE, 2),
        Kind::Semaphore(_) => (&PERMIT_RELEASE, 1),
        _ => (&RELEASE, 1),
    }
}

/// The keys and arguments of the call of [`held_release_script`] that gives back `keys` held with `token`: the
/// lock's key (and a read lock's writer, on whose channel its waiters listen), the token, and [`CLUSTER`] on a Redis
/// Cluster (`cluster`).
pub fn held_release_words(words: &mut impl Words, keys: &LockKeys, token: &str, cluster: bool) {
    words.word(&keys.lock);
    if let Kind::Read { writer } = &keys.kind {
        words.word(writer);
    }
    words.word(token);
    if cluster {
        words.word(CLUSTER);
    }
}

/// What a call of [`RELEASE`] for one lock answers: whether the lock was still ours (and is now given back).
pub fn released(reply: i64) -> bool {
    reply == 1
}

/// Take the oldest manual run asked for: see scripts/schedule_take_trigger.lua.
pub static SCHEDULE_TAKE_TRIGGER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/schedule_take_trigger.lua").to_owned()));

/// A replica's registration of a schedule taken away, when it stops: see scripts/schedule_leave.lua.
pub static SCHEDULE_LEAVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/schedule_leave.lua").to_owned()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acquire_scripts_raise_counters_below_the_same_floor() {
        let literal = format!("if f < {} then", crate::keys::CLOCK_FLOOR);
        assert!(ACQUIRE.source().contains(&literal), "fence.lua has `{literal}`");
        assert!(PERMIT_ACQUIRE.source().contains(&literal));
    }

    #[test]
    fn hashes_are_the_sha1_redis_names_a_script_by() {
        // `redis-cli SCRIPT LOAD "return 1"` answers this.
        assert_eq!(Script::new("return 1".to_owned()).hash(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
