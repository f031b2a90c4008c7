//! Taking a lock, defined once: [`COMMANDS`], the commands every acquisition of a lock starts with, and what an
//! acquisition's reply says ([`Acquired`]). The direct connection sends them one after another ([`write`],
//! direct/commands.rs; why that is as safe as a script: [`COMMANDS`]); the acquire script runs them first, as the Lua
//! function `take` that [`lua`] writes from the same definition (scripts.rs puts it before scripts/acquire.lua), then
//! does what only a script can: a holder asking again, marking a lock waited for, naming the holder and its lease,
//! raising a new fence counter to the server's clock. A change to how a lock is taken is made here, once, and both
//! paths have it.

use crate::keys::CLOCK_FLOOR;
use crate::resp::{self, Reply};
use std::fmt::Write as _;

/// A word of one of [`COMMANDS`]: itself, or a value of the acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// This literal.
    Text(&'static str),
    /// The lock's key.
    Lock,
    /// The fence counter's key.
    Fence,
    /// The owner token.
    Token,
    /// The lease, in ms.
    Ttl,
    /// How long the fence counter is kept, in ms.
    FenceTtl,
}

use Word::{Fence, FenceTtl, Lock, Text, Token, Ttl};

/// The commands that take a lock, in order, each answering one reply (see [`outcome`]):
/// - `SET lock token NX PX ttl GET`: takes the lock if free. Nil when it was free (now ours), else the value it holds
///   (a holder's token), or an error when the key holds another type.
/// - `INCR fence`: counts the fence counter up, whether the `SET` took the lock or not: an attempt that finds the lock
///   held uses up a fence, and fences only rise.
/// - `PEXPIRE fence fenceTtl`: keeps the counter `fenceTtl` from now. The last command, which a direct acquisition
///   leaves out when its locker kept the counter lately ([`Values::keep_counter`]).
///
/// The direct connection sends them without a transaction, so other clients' commands may run between the `SET` and the
/// `INCR`; fences still rise with the acquisitions that are used. An acquisition is of use only if its reply comes
/// before its lease's validity ends (the caller gives back one that comes later), and validity ends before the key's
/// TTL does (the drift allowance), so the `INCR`, which runs before its reply is sent, runs while the key is still
/// ours: no one else's `SET` can take the key between the two. Whoever takes it next does so after our key is gone,
/// that is after our `INCR`, and its own `INCR` comes after its `SET`: a higher fence (checked against a model of any
/// interleaving and delay: tests/acquisition_order.rs).
pub const COMMANDS: [&[Word]; 3] = [
    &[Text("SET"), Lock, Token, Text("NX"), Text("PX"), Ttl, Text("GET")],
    &[Text("INCR"), Fence],
    &[Text("PEXPIRE"), Fence, FenceTtl],
];

/// The values of one acquisition, for [`write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Values<'a> {
    /// The lock's key.
    pub lock: &'a str,
    /// The fence counter's key.
    pub fence: &'a str,
    /// The owner token.
    pub token: &'a str,
    /// The lease, in ms.
    pub ttl_ms: u128,
    /// How long the fence counter is kept, in ms.
    pub fence_ttl_ms: u128,
    /// Whether to keep the counter `fence_ttl_ms` from now (the last of [`COMMANDS`], `PEXPIRE`). Left out by a
    /// direct acquisition when its locker kept the counter lately; the acquire script always keeps it.
    pub keep_counter: bool,
}

impl Values<'_> {
    /// The commands of [`COMMANDS`] this acquisition sends, each answering one reply.
    pub fn commands(&self) -> &'static [&'static [Word]] {
        if self.keep_counter {
            &COMMANDS
        } else {
            &COMMANDS[..COMMANDS.len() - 1]
        }
    }
}

/// Appends the commands of [`Values::commands`] for `values`, in RESP.
pub(crate) fn write(buf: &mut Vec<u8>, values: &Values<'_>) {
    for command in values.commands() {
        resp::header(buf, command.len());
        for word in command.iter() {
            match *word {
                Text(text) => resp::arg_bytes(buf, text.as_bytes()),
                Lock => resp::arg_bytes(buf, values.lock.as_bytes()),
                Fence => resp::arg_bytes(buf, values.fence.as_bytes()),
                Token => resp::arg_bytes(buf, values.token.as_bytes()),
                Ttl => resp::arg_number(buf, values.ttl_ms),
                FenceTtl => resp::arg_number(buf, values.fence_ttl_ms),
            }
        }
    }
}

/// The Lua function `take(lock, fence, token, ttl, fence_ttl, keep_counter)`: runs [`COMMANDS`] and returns their
/// replies, in order; the last (keeping the counter) left out when `keep_counter` is `false` (not given: kept), as
/// [`Values::keep_counter`] has it. Redis before 7.0 refuses `SET` with both `NX` and `GET`, so a `SET … GET` is run as
/// `GET`, then the `SET` without it: within a script, which nothing runs between, that is the same command. A command
/// that fails stops the script with its error; the direct connection's commands go on with the next, so the outcome is
/// the same error, but there the counter still counts up.
pub(crate) fn lua() -> String {
    let word = |word: &Word| match word {
        Text(text) => format!("'{text}'"),
        Lock => "lock".to_owned(),
        Fence => "fence".to_owned(),
        Token => "token".to_owned(),
        Ttl => "ttl".to_owned(),
        FenceTtl => "fence_ttl".to_owned(),
    };
    let call = |words: &mut dyn Iterator<Item = &Word>| words.map(word).collect::<Vec<_>>().join(", ");
    let mut lua = String::from(
        "-- Taking the lock: the commands the direct connection sends, written here by \
         protocol/acquisition.rs.\nlocal function take(lock, fence, token, ttl, fence_ttl, keep_counter)\n",
    );
    for (n, command) in COMMANDS.iter().enumerate() {
        let n = n + 1;
        if n == COMMANDS.len() {
            let _ = writeln!(lua, "  local r{n} = keep_counter ~= false and redis.call({})", call(&mut command.iter()));
        } else if command[0] == Text("SET") && command.contains(&Text("GET")) {
            let _ = writeln!(lua, "  local r{n} = redis.call('GET', {})", word(&command[1]));
            let _ = writeln!(lua, "  redis.call({})", call(&mut command.iter().filter(|w| **w != Text("GET"))));
        } else {
            let _ = writeln!(lua, "  local r{n} = redis.call({})", call(&mut command.iter()));
        }
    }
    let replies = (1..=COMMANDS.len()).map(|n| format!("r{n}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(lua, "  return {replies}\nend");
    lua
}

/// What an acquisition came to on one server, read from its reply by [`Acquired::of`]: the acquire script's, or the
/// one [`outcome`] makes of the direct connection's commands'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The lock is ours, with this fence.
    Won { fence: i64 },
    /// The lock is ours, but its fence counter was new (below [`CLOCK_FLOOR`]: it did not exist, or it is from before
    /// counters expired): only the direct connection's commands leave it so. The acquire script, asked again with the
    /// same token, raises it to the server's clock and gives that fence.
    NewCounter,
    /// Someone else holds it for about `pttl_ms` more (-1 when not known: the direct connection's commands do not read
    /// it), named by `holder` when the script was asked to name it.
    Taken { pttl_ms: i64, holder: Option<String> },
}

impl Acquired {
    /// Reads an acquisition's reply: the fence when the lock is ours (a counter below [`CLOCK_FLOOR`] is new), else
    /// `-2 - pttl` of the holder; `holder` is the holder's token when the script named it.
    pub fn of(reply: i64, holder: Option<String>) -> Self {
        match reply {
            fence if fence >= CLOCK_FLOOR => Self::Won { fence },
            0.. => Self::NewCounter,
            taken => Self::Taken { pttl_ms: -2 - taken, holder },
        }
    }
}

/// One acquisition's reply, in the shape of the acquire script's, from the replies of [`COMMANDS`] (`pexpire`'s when it
/// was sent): the counter when the lock was free (now ours), -1 when it is held (these commands do not read the
/// holder's lease, which one attempt has no use for), or the error (say, the key holds another type). [`Acquired::of`]
/// reads it.
pub(crate) fn outcome(set: Reply, incr: Reply, pexpire: Option<Reply>) -> Reply {
    match (set, pexpire) {
        (Reply::Nil, Some(Reply::Error(e))) => Reply::Error(e),
        (Reply::Nil, _) => incr,
        (Reply::Other, _) => Reply::Int(-1),
        (other, _) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lua_runs_the_commands_in_order_with_set_get_split_for_redis_6_and_may_leave_out_keeping_the_counter() {
        assert_eq!(
            lua().lines().skip(1).collect::<Vec<_>>(),
            [
                "local function take(lock, fence, token, ttl, fence_ttl, keep_counter)",
                "  local r1 = redis.call('GET', lock)",
                "  redis.call('SET', lock, token, 'NX', 'PX', ttl)",
                "  local r2 = redis.call('INCR', fence)",
                "  local r3 = keep_counter ~= false and redis.call('PEXPIRE', fence, fence_ttl)",
                "  return r1, r2, r3",
                "end",
            ]
        );
    }

    #[test]
    fn a_reply_is_read_the_same_whichever_path_made_it() {
        assert_eq!(Acquired::of(CLOCK_FLOOR + 7, None), Acquired::Won { fence: CLOCK_FLOOR + 7 });
        assert_eq!(Acquired::of(3, None), Acquired::NewCounter);
        assert_eq!(Acquired::of(-1, None), Acquired::Taken { pttl_ms: -1, holder: None });
        let named = Acquired::of(-2 - 250, Some("t".into()));
        assert_eq!(named, Acquired::Taken { pttl_ms: 250, holder: Some("t".into()) });
        // Commands that found the lock held answer as the script does for a holder of unknown lease.
        assert_eq!(outcome(Reply::Other, Reply::Int(9), Some(Reply::Int(1))), Reply::Int(-1));
        assert_eq!(outcome(Reply::Nil, Reply::Int(9), Some(Reply::Int(1))), Reply::Int(9));
        assert_eq!(outcome(Reply::Nil, Reply::Int(9), None), Reply::Int(9), "the counter not kept again");
        let oom = Reply::Error("OOM".into());
        assert_eq!(outcome(Reply::Nil, Reply::Int(9), Some(oom.clone())), oom);
    }

    #[test]
    fn the_direct_connection_writes_the_same_commands_and_may_leave_out_keeping_the_counter() {
        for keep_counter in [true, false] {
            let mut buf = Vec::new();
            let values =
                Values { lock: "l", fence: "{l}:fence", token: "t", ttl_ms: 30_000, fence_ttl_ms: 9, keep_counter };
            write(&mut buf, &values);
            let mut expected = Vec::new();
            resp::encode(&mut expected, &["SET", "l", "t", "NX", "PX", "30000", "GET"]);
            resp::encode(&mut expected, &["INCR", "{l}:fence"]);
            if keep_counter {
                resp::encode(&mut expected, &["PEXPIRE", "{l}:fence", "9"]);
            }
            assert_eq!(String::from_utf8(buf).unwrap(), String::from_utf8(expected).unwrap());
            assert_eq!(values.commands().len(), 2 + usize::from(keep_counter));
        }
    }
}
