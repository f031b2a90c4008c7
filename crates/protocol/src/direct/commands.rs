//! The commands of direct calls, written: an acquisition is [`acquisition::COMMANDS`], or the acquire script when
//! those found the fence counter new, or for a semaphore's permit, a read or the write lock its script; a release is
//! the release script (a permit's or a read lock's, its own), or the server's own compare-and-delete where it offers
//! it (offers.rs). Consecutive releases of locks by script share one command on a single server.

use crate::acquisition;
use crate::direct::awaited::AwaitedReplies;
use crate::keys::LockKeys;
use crate::offers::{CompareAndDelete, Offers};
use crate::resp;
use crate::scripts;
use std::time::Instant;

/// A direct call's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectCommand<'a> {
    /// Take a lock: the commands of [`acquisition::COMMANDS`] with these values.
    Acquire(acquisition::Values<'a>),
    /// Take a lock by the acquire script, which raises a new counter to the server clock: a lock's acquisition asked
    /// again, with its token, after its commands took it with a new counter (the script keeps the key ours).
    AcquireByScript(acquisition::Values<'a>),
    /// Release a lock we own: the release script, for `lock` held with `token`, on a Redis Cluster when `cluster`
    /// (its waiters are woken on the sharded channel there).
    Release { lock: &'a str, token: &'a str, cluster: bool },
    /// Release a lock we own by the server's own compare-and-delete ([`CompareAndDelete`]): a plain lease's, on a
    /// server that offers it.
    CompareAndDelete { command: CompareAndDelete, lock: &'a str, token: &'a str },
    /// Take a semaphore's permit, a read or the write lock of `keys` with `token`, in one attempt: its script
    /// ([`scripts::held_acquire_keys`], [`scripts::held_acquire_args`]), on a Redis Cluster when `one_slot`.
    AcquireHeld { keys: &'a LockKeys, token: &'a str, ttl_ms: u128, fence_ttl_ms: u128, one_slot: bool },
    /// Give back a permit or a read lock of `keys` held with `token` ([`scripts::held_release_script`]).
    ReleaseHeld { keys: &'a LockKeys, token: &'a str, cluster: bool },
}

/// What a caller keeps of a direct call until its reply: it knows the call's command.
pub trait DirectCall {
    /// The call's command.
    fn command(&self) -> DirectCommand<'_>;

    /// The call's command is about to be encoded at `at`, on a socket whose server offers `offers` (an acquisition's
    /// lease counts from then; a release decides its command).
    fn encoded(&mut self, at: Instant, offers: Offers);
}

/// Appends the commands of `calls`, in order, and awaits their replies in `awaited`: with `group`, the releases of
/// each run of consecutive ones share one script call, which costs Redis less per lock than a call each
/// (bench/README.md, profile step 19); without (a cluster master, which refuses a command whose keys are in different
/// slots), each release has its own. An acquisition is the commands that take a lock ([`acquisition::COMMANDS`]:
/// `SET … NX PX … GET`, `INCR` of the fence counter and, unless its locker kept the counter lately, `PEXPIRE`): as safe
/// as the acquire script, which starts with the same commands (see [`acquisition::COMMANDS`]), for a fraction of
/// Redis's work (no Lua; bench/README.md, profile step 22, and bench/results/2026-11-27-plain-commands.md). A counter
/// found new (below [`crate::keys::CLOCK_FLOOR`]) needs the acquire script to raise it
/// ([`acquisition::Acquired::NewCounter`]); an acquire script is one call's.
pub fn write_commands<'a, C: DirectCall + 'a>(
    calls: impl IntoIterator<Item = &'a C>,
    buf: &mut Vec<u8>,
    awaited: &mut AwaitedReplies,
    group: bool,
) {
    let mut calls = calls.into_iter().map(|call| call.command()).peekable();
    while let Some(first) = calls.next() {
        match first {
            DirectCommand::Acquire(values) => {
                acquisition::write(buf, &values);
                awaited.acquisition(values.commands().len());
            }
            DirectCommand::AcquireByScript(values) => {
                write_acquire_script(&values, buf);
                awaited.command(1);
            }
            DirectCommand::AcquireHeld { keys, token, ttl_ms, fence_ttl_ms, one_slot } => {
                let (script, names) = scripts::held_acquire_keys(keys, one_slot);
                let mut args = Vec::new();
                scripts::held_acquire_args(&mut Collect(&mut args), &keys.kind, token, ttl_ms, fence_ttl_ms, false);
                write_script(buf, script, names.iter().map(|name| name.as_ref()), args.iter().map(String::as_str));
                awaited.command(1);
            }
            DirectCommand::ReleaseHeld { keys, token, cluster } => {
                let (script, key_count) = scripts::held_release_script(keys);
                let mut words = Vec::new();
                scripts::held_release_words(&mut Collect(&mut words), keys, token, cluster);
                let (names, args) = words.split_at(key_count);
                write_script(buf, script, names.iter().map(String::as_str), args.iter().map(String::as_str));
                awaited.command(1);
            }
            DirectCommand::CompareAndDelete { command, lock, token } => {
                resp::encode(buf, &command.words(lock, token));
                awaited.command(1);
            }
            DirectCommand::Release { .. } => {
                let mut run = vec![first];
                while let Some(next) = calls.next_if(|next| group && matches!(next, DirectCommand::Release { .. })) {
                    run.push(next);
                }
                write_releases(&run, buf);
                awaited.command(run.len());
            }
        }
    }
}

/// `EVALSHA <acquire> 2 lock fence token ttl fenceTtl 0 0`: the acquire script, neither naming the holder nor marking
/// the lock waited for ([`scripts::acquire_words`]).
fn write_acquire_script(values: &acquisition::Values<'_>, buf: &mut Vec<u8>) {
    let mut count = Count(0);
    scripts::acquire_words(&mut count, values, false, 0);
    resp::header(buf, 3 + count.0);
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, scripts::ACQUIRE.hash().as_bytes());
    resp::arg_number(buf, scripts::ACQUIRE_KEYS);
    scripts::acquire_words(&mut Resp(buf), values, false, 0);
}

/// `EVALSHA <release> <n> lock… token…` ([`scripts::release_words`]), and [`scripts::CLUSTER`] on a cluster.
fn write_releases(run: &[DirectCommand<'_>], buf: &mut Vec<u8>) {
    let released = run.iter().filter_map(|command| match command {
        DirectCommand::Release { lock, token, .. } => Some((*lock, *token)),
        _ => None,
    });
    let cluster = matches!(run.first(), Some(DirectCommand::Release { cluster: true, .. }));
    let mut count = Count(0);
    scripts::release_words(&mut count, released.clone(), cluster);
    resp::header(buf, 3 + count.0);
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, scripts::RELEASE.hash().as_bytes());
    resp::arg_number(buf, run.len());
    scripts::release_words(&mut Resp(buf), released, cluster);
}

/// `EVALSHA <script> <number of names> <names> <args>`.
fn write_script<'w>(
    buf: &mut Vec<u8>,
    script: &scripts::Script,
    names: impl ExactSizeIterator<Item = &'w str>,
    args: impl ExactSizeIterator<Item = &'w str>,
) {
    resp::header(buf, 3 + names.len() + args.len());
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, script.hash().as_bytes());
    resp::arg_number(buf, names.len());
    for word in names.chain(args) {
        resp::arg_bytes(buf, word.as_bytes());
    }
}

/// Keeps a script call's words (a held lock's, written once per call: not the hot path of a plain lock's).
struct Collect<'a>(&'a mut Vec<String>);

impl scripts::Words for Collect<'_> {
    fn word(&mut self, word: &str) {
        self.0.push(word.to_owned());
    }

    fn number(&mut self, n: u128) {
        self.0.push(n.to_string());
    }
}

/// Counts a script call's words, for the RESP header that comes before them.
struct Count(usize);

impl scripts::Words for Count {
    fn word(&mut self, _: &str) {
        self.0 += 1;
    }

    fn number(&mut self, _: u128) {
        self.0 += 1;
    }
}

/// Writes a script call's words as RESP bulk strings.
struct Resp<'a>(&'a mut Vec<u8>);

impl scripts::Words for Resp<'_> {
    fn word(&mut self, word: &str) {
        resp::arg_bytes(self.0, word.as_bytes());
    }

    fn number(&mut self, n: u128) {
        resp::arg_number(self.0, n);
    }
}
