//! The commands of direct calls, written: an acquisition is [`acquisition::COMMANDS`] in a `MULTI`/`EXEC`
//! transaction, or the acquire script when a transaction found the fence counter new; a release is the release
//! script. Consecutive transactions, and consecutive releases, share one command on a single server.

use crate::acquisition;
use crate::direct::awaited::AwaitedReplies;
use crate::resp;
use crate::scripts;
use std::time::Instant;

/// A direct call's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectCommand<'a> {
    /// Take a lock: the commands of [`acquisition::COMMANDS`] with these values, in a transaction.
    Acquire(acquisition::Values<'a>),
    /// Take a lock by the acquire script, which raises a new counter to the server clock: a lock's acquisition asked
    /// again, with its token, after a transaction took it with a new counter (the script keeps the key ours).
    AcquireByScript(acquisition::Values<'a>),
    /// Release a lock we own: the release script, for `lock` held with `token`, on a Redis Cluster when `cluster`
    /// (its waiters are woken on the sharded channel there).
    Release { lock: &'a str, token: &'a str, cluster: bool },
}

/// What a caller keeps of a direct call until its reply: it knows the call's command.
pub trait DirectCall {
    /// The call's command.
    fn command(&self) -> DirectCommand<'_>;

    /// The call's command was encoded at `at`, about to be written (an acquisition's lease counts from then).
    fn encoded(&mut self, at: Instant);
}

/// How a call is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written<'a> {
    /// In a transaction.
    Transaction(acquisition::Values<'a>),
    /// The acquire script.
    Script(acquisition::Values<'a>),
    /// In a release script call.
    Release { lock: &'a str, token: &'a str, cluster: bool },
}

impl Written<'_> {
    /// Whether `next` goes in the same command: transactions with transactions, releases with releases.
    fn shares_a_command_with(&self, next: &Self) -> bool {
        matches!(
            (self, next),
            (Self::Transaction(_), Self::Transaction(_)) | (Self::Release { .. }, Self::Release { .. })
        )
    }
}

/// Appends the commands of `calls`, in order, and awaits their replies in `awaited`: with `group`, the transactions of
/// each run of consecutive ones, and the releases of each run of consecutive ones, share one command, which costs Redis
/// less per lock than a command each (bench/README.md, profile steps 19 and 22); without (a cluster master, which
/// refuses a command whose keys are in different slots), each call has its own. An acquire script is one call's.
pub fn write_commands<'a, C: DirectCall + 'a>(
    calls: impl IntoIterator<Item = &'a C>,
    buf: &mut Vec<u8>,
    awaited: &mut AwaitedReplies,
    group: bool,
) {
    let written = |command: DirectCommand<'a>| match command {
        DirectCommand::Acquire(values) => Written::Transaction(values),
        DirectCommand::AcquireByScript(values) => Written::Script(values),
        DirectCommand::Release { lock, token, cluster } => Written::Release { lock, token, cluster },
    };
    let mut calls = calls.into_iter().map(|call| written(call.command())).peekable();
    while let Some(first) = calls.next() {
        let mut run = vec![first];
        while let Some(next) = calls.next_if(|next| group && first.shares_a_command_with(next)) {
            run.push(next);
        }
        match first {
            Written::Transaction(_) => {
                write_acquisitions(&run, buf);
                awaited.acquisitions(run.len());
            }
            Written::Script(values) => {
                write_acquire_script(&values, buf);
                awaited.script(1);
            }
            Written::Release { .. } => {
                write_releases(&run, buf);
                awaited.script(run.len());
            }
        }
    }
}

/// `MULTI`, then the commands that take a lock ([`acquisition::COMMANDS`]: `SET … NX PX … GET`, `INCR` and `PEXPIRE` of
/// the fence counter) for each, then `EXEC`: as atomic as the acquire script, which starts with the same commands, for
/// a fraction of Redis's work (no Lua; bench/README.md, profile step 22). A counter found new (below
/// [`crate::keys::CLOCK_FLOOR`]) needs the acquire script to raise it ([`acquisition::Acquired::NewCounter`]).
fn write_acquisitions(run: &[Written<'_>], buf: &mut Vec<u8>) {
    resp::encode(buf, &["MULTI"]);
    for written in run {
        if let Written::Transaction(values) = written {
            acquisition::write(buf, values);
        }
    }
    resp::encode(buf, &["EXEC"]);
}

/// `EVALSHA <acquire> 2 lock fence token ttl fenceTtl 0 0`: the acquire script, neither naming the holder nor marking
/// the lock waited for.
fn write_acquire_script(values: &acquisition::Values<'_>, buf: &mut Vec<u8>) {
    resp::header(buf, 10);
    for word in ["EVALSHA", scripts::ACQUIRE.hash(), "2", values.lock, values.fence, values.token] {
        resp::arg_bytes(buf, word.as_bytes());
    }
    resp::arg_number(buf, values.ttl_ms);
    resp::arg_number(buf, values.fence_ttl_ms);
    resp::arg_bytes(buf, b"0");
    resp::arg_bytes(buf, b"0");
}

/// `EVALSHA <release> <n> lock… token…`, and [`scripts::CLUSTER`] on a cluster.
fn write_releases(run: &[Written<'_>], buf: &mut Vec<u8>) {
    let released = || {
        run.iter().filter_map(|written| match written {
            Written::Release { lock, token, .. } => Some((*lock, *token)),
            _ => None,
        })
    };
    let cluster = matches!(run.first(), Some(Written::Release { cluster: true, .. }));
    resp::header(buf, 3 + 2 * run.len() + usize::from(cluster));
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, scripts::RELEASE.hash().as_bytes());
    resp::arg_number(buf, run.len());
    for (lock, _) in released() {
        resp::arg_bytes(buf, lock.as_bytes());
    }
    for (_, token) in released() {
        resp::arg_bytes(buf, token.as_bytes());
    }
    if cluster {
        resp::arg_bytes(buf, scripts::CLUSTER.as_bytes());
    }
}
