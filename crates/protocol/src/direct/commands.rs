//! The commands of direct calls, written: an acquisition is [`acquisition::COMMANDS`] in a `MULTI`/`EXEC`
//! transaction, a release the release script; consecutive calls of one kind share one command on a single server.

use crate::acquisition;
use crate::direct::awaited::AwaitedReplies;
use crate::resp;
use crate::scripts;
use std::time::Instant;

/// A direct call's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectCommand<'a> {
    /// Take a lock: the commands of [`acquisition::COMMANDS`] with these values.
    Acquire(acquisition::Values<'a>),
    /// Release a lock we own: the release script, for `lock` held with `token`.
    Release { lock: &'a str, token: &'a str },
}

/// What a caller keeps of a direct call until its reply: it knows the call's command.
pub trait DirectCall {
    /// The call's command.
    fn command(&self) -> DirectCommand<'_>;

    /// The call's command was encoded at `at`, about to be written (an acquisition's lease counts from then).
    fn encoded(&mut self, at: Instant);
}

/// Appends the commands of `calls`, in order, and awaits their replies in `awaited`: with `group`, the calls of each
/// run of consecutive calls of one kind share one command, which costs Redis less per lock than a command each
/// (bench/README.md, profile steps 19 and 22); without (a cluster master, which refuses a command whose keys are in
/// different slots), each call has its own.
pub fn write_commands<'a, C: DirectCall + 'a>(
    calls: impl IntoIterator<Item = &'a C>,
    buf: &mut Vec<u8>,
    awaited: &mut AwaitedReplies,
    group: bool,
) {
    let mut calls = calls.into_iter().map(C::command).peekable();
    while let Some(first) = calls.next() {
        let acquisitions = matches!(first, DirectCommand::Acquire(_));
        let mut run = vec![first];
        while let Some(next) = calls.next_if(|next| group && matches!(next, DirectCommand::Acquire(_)) == acquisitions)
        {
            run.push(next);
        }
        if acquisitions {
            write_acquisitions(&run, buf);
            awaited.acquisitions(run.len());
        } else {
            write_releases(&run, buf);
            awaited.script(run.len());
        }
    }
}

/// `MULTI`, then the commands that take a lock ([`acquisition::COMMANDS`]: `SET … NX PX … GET`, `INCR` and `PEXPIRE` of
/// the fence counter) for each, then `EXEC`: as atomic as the acquire script, which starts with the same commands, for
/// a fraction of Redis's work (no Lua; bench/README.md, profile step 22). A counter found new (below
/// [`crate::keys::CLOCK_FLOOR`]) needs the acquire script to raise it (see [`acquisition::Acquired::of_transaction`]).
fn write_acquisitions(run: &[DirectCommand<'_>], buf: &mut Vec<u8>) {
    resp::encode(buf, &["MULTI"]);
    for command in run {
        if let DirectCommand::Acquire(values) = command {
            acquisition::write(buf, values);
        }
    }
    resp::encode(buf, &["EXEC"]);
}

/// `EVALSHA <release> <n> lock… token…`.
fn write_releases(run: &[DirectCommand<'_>], buf: &mut Vec<u8>) {
    let released = || {
        run.iter().filter_map(|command| match command {
            DirectCommand::Release { lock, token } => Some((*lock, *token)),
            DirectCommand::Acquire(_) => None,
        })
    };
    resp::header(buf, 3 + 2 * run.len());
    resp::arg_bytes(buf, b"EVALSHA");
    resp::arg_bytes(buf, scripts::RELEASE.hash().as_bytes());
    resp::arg_number(buf, run.len());
    for (lock, _) in released() {
        resp::arg_bytes(buf, lock.as_bytes());
    }
    for (_, token) in released() {
        resp::arg_bytes(buf, token.as_bytes());
    }
}
