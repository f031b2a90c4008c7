//! Taking a lock, defined once: [`COMMANDS`], the commands every acquisition of a lock starts with. The direct
//! connection sends them as a `MULTI`/`EXEC` transaction ([`write`], direct/calls.rs); the acquire script runs them
//! first, as the Lua function `take` that [`lua`] writes from the same definition (scripts.rs puts it before
//! scripts/acquire.lua), then does what only a script can: a holder asking again, marking a lock waited for, naming
//! the holder and its lease, raising a new fence counter to the server's clock. A change to how a lock is taken is
//! made here, once, and both paths have it.

use crate::protocol::resp::{self, Reply};
use std::fmt::Write as _;

/// A word of one of [`COMMANDS`]: itself, or a value of the acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Word {
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
/// - `INCR fence`: counts the fence counter up. A transaction cannot branch, so the counter goes up whether the
///   `SET` took the lock or not: an attempt that finds the lock held uses up a fence, and fences only rise.
/// - `PEXPIRE fence fenceTtl`: keeps the counter `fenceTtl` from now.
pub(crate) const COMMANDS: [&[Word]; 3] = [
    &[Text("SET"), Lock, Token, Text("NX"), Text("PX"), Ttl, Text("GET")],
    &[Text("INCR"), Fence],
    &[Text("PEXPIRE"), Fence, FenceTtl],
];

/// The values of one acquisition, for [`write`].
pub(crate) struct Values<'a> {
    pub(crate) lock: &'a str,
    pub(crate) fence: &'a str,
    pub(crate) token: &'a str,
    pub(crate) ttl_ms: u128,
    pub(crate) fence_ttl_ms: u128,
}

/// Appends [`COMMANDS`] for `values`, in RESP (for a transaction: the caller writes `MULTI` and `EXEC` around).
pub(crate) fn write(buf: &mut Vec<u8>, values: &Values<'_>) {
    for command in COMMANDS {
        resp::header(buf, command.len());
        for word in command {
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

/// The Lua function `take(lock, fence, token, ttl, fence_ttl)`: runs [`COMMANDS`] and returns their replies, in
/// order. Redis before 7.0 refuses `SET` with both `NX` and `GET`, so a `SET … GET` is run as `GET`, then the `SET`
/// without it: within a script, which nothing runs between, that is the same command. A command that fails stops the
/// script with its error; a transaction goes on with the next commands, so the outcome is the same error, but there
/// the counter still counts up.
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
        "-- Taking the lock: the commands the direct connection sends as a transaction, written here by \
         protocol/acquisition.rs.\nlocal function take(lock, fence, token, ttl, fence_ttl)\n",
    );
    for (n, command) in COMMANDS.iter().enumerate() {
        let n = n + 1;
        if command[0] == Text("SET") && command.contains(&Text("GET")) {
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

/// One acquisition's reply, as the acquire script answers a one-attempt call, from the replies of [`COMMANDS`]: the
/// counter when the lock was free (now ours), a negative number when it is held (a transaction does not read the
/// holder's lease, which one attempt has no use for), or the error (say, the key holds another type).
pub(crate) fn outcome(set: Reply, incr: Reply, pexpire: Reply) -> Reply {
    match (set, pexpire) {
        (Reply::Nil, Reply::Error(e)) => Reply::Error(e),
        (Reply::Nil, _) => incr,
        (Reply::Other, _) => Reply::Int(-1),
        (other, _) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lua_runs_the_commands_in_order_with_set_get_split_for_redis_6() {
        assert_eq!(
            lua().lines().skip(1).collect::<Vec<_>>(),
            [
                "local function take(lock, fence, token, ttl, fence_ttl)",
                "  local r1 = redis.call('GET', lock)",
                "  redis.call('SET', lock, token, 'NX', 'PX', ttl)",
                "  local r2 = redis.call('INCR', fence)",
                "  local r3 = redis.call('PEXPIRE', fence, fence_ttl)",
                "  return r1, r2, r3",
                "end",
            ]
        );
    }

    #[test]
    fn the_transaction_writes_the_same_commands() {
        let mut buf = Vec::new();
        let values = Values { lock: "l", fence: "{l}:fence", token: "t", ttl_ms: 30_000, fence_ttl_ms: 9 };
        write(&mut buf, &values);
        let mut expected = Vec::new();
        resp::encode(&mut expected, &["SET", "l", "t", "NX", "PX", "30000", "GET"]);
        resp::encode(&mut expected, &["INCR", "{l}:fence"]);
        resp::encode(&mut expected, &["PEXPIRE", "{l}:fence", "9"]);
        assert_eq!(String::from_utf8(buf).unwrap(), String::from_utf8(expected).unwrap());
    }
}
