//! What a server offers beyond our scripts, learned once per connection: its own compare-and-delete (`DELIFEQ`,
//! Valkey 9.0; `DELEX … IFEQ`, Redis 8.4) and compare-and-set with a lease (`SET … IFEQ … PX`, Valkey 8.1, Redis
//! 8.4), which release and extend a lock with a fraction of a script's work for Redis. Each does what the script does
//! only when the lock's key holds its owner alone: once anyone waited for the lock, the key holds the owner followed by
//! a waiter's mark (scripts/acquire.lua), which only the release script acts on (it wakes the waiters). A lock the
//! command does not find holding its owner alone goes to the script, which finds out why (waited for, or not ours any
//! more).
//!
//! So the command is tried only for a lease taken in one attempt by a caller that did not wait (a *plain* lease: its
//! key is expected to hold its owner alone); a waiting caller's lease (whose key likely holds a waiter's mark: others
//! of its locker wait behind it, or waited with it) goes to the script at once, so that a hot key's hand-offs take no
//! more commands than before.

/// The commands of its own a server was found to offer, on one connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Offers {
    /// Its compare-and-delete, if any.
    pub compare_and_delete: Option<CompareAndDelete>,
}

/// A server's own compare-and-delete: it deletes a lock while it holds exactly its owner, and answers 1, or 0 when it
/// did not hold exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareAndDelete {
    /// `DELIFEQ key value` (Valkey 9.0).
    DelIfEq,
    /// `DELEX key IFEQ value` (Redis 8.4).
    DelEx,
}

impl CompareAndDelete {
    /// Both, in the order a connection tries them: a server offers one or none.
    pub const ALL: [Self; 2] = [Self::DelIfEq, Self::DelEx];

    /// The command that deletes `lock` while it holds `owner`.
    pub fn words<'a>(self, lock: &'a str, owner: &'a str) -> Words<'a> {
        match self {
            Self::DelIfEq => Words { words: ["DELIFEQ", lock, owner, ""], len: 3 },
            Self::DelEx => Words { words: ["DELEX", lock, "IFEQ", owner], len: 4 },
        }
    }

    /// The command's name, as `INFO commandstats` and `ACL SETUSER` have it.
    pub fn name(self) -> &'static str {
        match self {
            Self::DelIfEq => "delifeq",
            Self::DelEx => "delex",
        }
    }
}

/// A command's words, kept without allocating.
#[derive(Debug, Clone, Copy)]
pub struct Words<'a> {
    words: [&'a str; 4],
    len: usize,
}

impl<'a> std::ops::Deref for Words<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &[&'a str] {
        &self.words[..self.len]
    }
}

/// The server's compare-and-set of `lock`'s lease to `ttl_ms` while it holds `owner` (`ttl_ms` written by the
/// caller as the last word): `OK` when set, nil when it did not hold exactly that.
pub fn compare_and_set<'a>(lock: &'a str, owner: &'a str) -> [&'a str; 6] {
    ["SET", lock, owner, "IFEQ", owner, "PX"]
}

/// What the reply to one of the server's own commands comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compared {
    /// Done: the lock held its owner alone, and is deleted or has its new lease.
    Done,
    /// The lock did not hold its owner alone: the script decides (it was waited for, or is not ours any more).
    Script,
    /// The server does not offer the command (an older server refuses it as unknown or its option as a syntax error),
    /// or the user's ACL denies it: the script does it, and does from then on on that connection.
    Refused,
    /// The call failed with this error, as the script's would (the key holds another type, the server is out of
    /// memory): the script is not tried.
    Failed(String),
}

impl Compared {
    /// What the reply comes to: `done` when the command did it (a compare-and-delete's 1, SET's OK), `error` the
    /// error reply's text.
    pub fn of(done: bool, error: Option<&str>) -> Self {
        match error {
            Some(text) if refused(text) => Self::Refused,
            Some(text) => Self::Failed(text.to_owned()),
            None if done => Self::Done,
            None => Self::Script,
        }
    }
}

/// Whether `error` (the server's error, as it came or within a longer message) says the server does not run the
/// command as we sent it, or the ACL denies it.
pub fn refused(error: &str) -> bool {
    ["unknown command", "syntax error", "unknown subcommand", "NOPERM", "no permissions"]
        .iter()
        .any(|part| error.contains(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_told_from_a_failure() {
        assert_eq!(Compared::of(true, None), Compared::Done);
        assert_eq!(Compared::of(false, None), Compared::Script);
        let unknown = "ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' ";
        assert_eq!(Compared::of(false, Some(unknown)), Compared::Refused);
        assert_eq!(Compared::of(false, Some("ERR syntax error")), Compared::Refused);
        let denied = "NOPERM User snatch has no permissions to run the 'delifeq' command";
        assert_eq!(Compared::of(false, Some(denied)), Compared::Refused);
        let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(Compared::of(false, Some(wrong)), Compared::Failed(wrong.into()));
    }

    #[test]
    fn each_compare_and_delete_has_its_words() {
        assert_eq!(*CompareAndDelete::DelIfEq.words("k", "t"), ["DELIFEQ", "k", "t"]);
        assert_eq!(*CompareAndDelete::DelEx.words("k", "t"), ["DELEX", "k", "IFEQ", "t"]);
    }
}
