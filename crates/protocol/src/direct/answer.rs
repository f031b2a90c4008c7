//! What a direct call's reply, or its absence, says ([`Answer`]: an integer, a call to finish on the locker's own
//! connection, or a failure), and what that comes to for an acquisition ([`Acquisition`]) and a release
//! ([`Release`]), decided here once; the caller (snatch-core's direct/calls.rs) does what each says.

use crate::acquisition::Acquired;
use crate::direct::session::{CallReply, NoReply};
use crate::offers::Compared;
use crate::resp::Reply;
use crate::scripts;
use std::time::Instant;

/// The error replies after which a direct call is finished on the locker's own connection: the server lacks the
/// release script, or (a cluster master) no longer serves the key's slot, or cannot now. The locker's own connection
/// knows what to do about each.
const FALLBACK_ON: [&str; 5] = ["NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"];

/// What a direct call's reply comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The integer the call answers with.
    Int(i64),
    /// Finish the call on the locker's own connection, with the same token: the server could not run it there
    /// ([`FALLBACK_ON`]), or the socket failed before its reply (whether Redis ran it is not known).
    Fallback,
    /// The call failed: the server's error, or a reply no call of ours gets.
    Failed(String),
    /// The command timeout passed before the reply: the call fails, as on the locker's own connection.
    TimedOut,
}

impl Answer {
    /// What `reply` says.
    pub fn of(reply: CallReply) -> Self {
        match reply {
            Ok(Reply::Int(n)) => Self::Int(n),
            Ok(Reply::Error(text)) if FALLBACK_ON.iter().any(|code| text.starts_with(code)) => Self::Fallback,
            Err(NoReply::Dropped) => Self::Fallback,
            Ok(Reply::Error(text)) => Self::Failed(text),
            Ok(other) => Self::Failed(format!("unexpected reply {other:?}")),
            Err(NoReply::TimedOut) => Self::TimedOut,
        }
    }
}

/// How a direct acquisition takes its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// The commands of acquisition.rs, the cheapest for Redis.
    Commands,
    /// The acquire script: the commands took the key with a new fence counter, which the script raises to the
    /// server's clock.
    Script,
}

/// What a direct acquisition's reply comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquisition {
    /// The lock is ours, with this fence, and its reply came within its lease's validity.
    Won { fence: i64 },
    /// Someone else holds it.
    Taken,
    /// Send it again, by the acquire script: the commands took the key with a new fence counter.
    ByScript,
    /// Finish it on the locker's own connection, with the same token.
    Fallback,
    /// It failed: the server's error, or (`None`) the command timeout passed. Redis may have taken the key for it
    /// (before a later command failed), or may still (it timed out): the key is to be given back.
    Failed { cause: Option<String> },
    /// Ours, but its reply came after its lease's validity ended, too late to be of use: the key is to be given back,
    /// and the acquisition fails.
    Late,
}

impl Acquisition {
    /// What `answer` comes to for an acquisition taken `way`, whose lease is valid until `valid_until`, at `now`.
    pub fn of(answer: Answer, way: Way, valid_until: Instant, now: Instant) -> Self {
        let reply = match answer {
            Answer::Int(reply) => reply,
            Answer::Fallback => return Self::Fallback,
            Answer::Failed(cause) => return Self::Failed { cause: Some(cause) },
            Answer::TimedOut => return Self::Failed { cause: None },
        };
        match (Acquired::of(reply, None), way) {
            (Acquired::Won { .. }, _) if now >= valid_until => Self::Late,
            (Acquired::Won { fence }, _) => Self::Won { fence },
            (Acquired::Taken { .. }, _) => Self::Taken,
            // Ours, but the counter was new (or from before counters expired): the acquire script, asked again with
            // the same token, raises it to the server's clock and gives that as the fence.
            (Acquired::NewCounter, Way::Commands) => Self::ByScript,
            (Acquired::NewCounter, Way::Script) => Self::Fallback,
        }
    }
}

/// What a direct release's reply comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Whether the lock was still ours (and is now given back).
    Done(bool),
    /// Send it again, by the release script: the server's compare-and-delete did not find the lock holding its owner
    /// alone (waited for, or not ours), or the server refused it.
    ByScript,
    /// Finish it on the locker's own connection.
    Fallback,
    /// It failed: the server's error, or (`None`) the command timeout passed.
    Failed { cause: Option<String> },
}

impl Release {
    /// What `answer` comes to for a release.
    pub fn of(answer: Answer) -> Self {
        match answer {
            Answer::Int(reply) => Self::Done(scripts::released(reply)),
            Answer::Fallback => Self::Fallback,
            Answer::Failed(cause) => Self::Failed { cause: Some(cause) },
            Answer::TimedOut => Self::Failed { cause: None },
        }
    }

    /// What `answer` comes to for a release by the server's own compare-and-delete (`DELIFEQ`, `DELEX … IFEQ`).
    pub fn of_compare_and_delete(answer: Answer) -> Self {
        let compared = match answer {
            Answer::Int(deleted) => Compared::of(deleted == 1, None),
            Answer::Failed(cause) => Compared::of(false, Some(&cause)),
            Answer::Fallback | Answer::TimedOut => return Self::of(answer),
        };
        match compared {
            Compared::Done => Self::Done(true),
            Compared::Script | Compared::Refused => Self::ByScript,
            Compared::Failed(cause) => Self::Failed { cause: Some(cause) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirections_and_lost_sockets_fall_back_and_the_rest_fails() {
        assert_eq!(Answer::of(Ok(Reply::Int(3))), Answer::Int(3));
        for text in ["NOSCRIPT No matching script", "MOVED 1 h:1", "ASK 1 h:1", "TRYAGAIN x", "CLUSTERDOWN x"] {
            assert_eq!(Answer::of(Ok(Reply::Error(text.into()))), Answer::Fallback, "{text}");
        }
        assert_eq!(Answer::of(Err(NoReply::Dropped)), Answer::Fallback);
        assert_eq!(Answer::of(Err(NoReply::TimedOut)), Answer::TimedOut);
        assert_eq!(Answer::of(Ok(Reply::Error("WRONGTYPE".into()))), Answer::Failed("WRONGTYPE".into()));
        assert_eq!(Answer::of(Ok(Reply::Nil)), Answer::Failed("unexpected reply Nil".into()));
    }

    #[test]
    fn an_acquisition_is_won_in_time_taken_resent_by_script_or_given_back() {
        use crate::keys::CLOCK_FLOOR;
        let now = Instant::now();
        let later = now + std::time::Duration::from_millis(10);
        let won = Answer::Int(CLOCK_FLOOR + 1);
        assert_eq!(
            Acquisition::of(won.clone(), Way::Commands, later, now),
            Acquisition::Won { fence: CLOCK_FLOOR + 1 }
        );
        assert_eq!(Acquisition::of(won, Way::Commands, now, later), Acquisition::Late);
        assert_eq!(Acquisition::of(Answer::Int(-1), Way::Commands, later, now), Acquisition::Taken);
        assert_eq!(Acquisition::of(Answer::Int(5), Way::Commands, later, now), Acquisition::ByScript);
        assert_eq!(Acquisition::of(Answer::Int(5), Way::Script, later, now), Acquisition::Fallback);
        assert_eq!(Acquisition::of(Answer::TimedOut, Way::Commands, later, now), Acquisition::Failed { cause: None });
        assert_eq!(Release::of(Answer::Int(1)), Release::Done(true));
        assert_eq!(Release::of(Answer::Int(0)), Release::Done(false));
        assert_eq!(Release::of(Answer::Fallback), Release::Fallback);
    }

    #[test]
    fn a_compare_and_delete_is_done_or_sent_again_by_script() {
        assert_eq!(Release::of_compare_and_delete(Answer::Int(1)), Release::Done(true));
        assert_eq!(Release::of_compare_and_delete(Answer::Int(0)), Release::ByScript, "waited for, or not ours");
        let denied = Answer::Failed("NOPERM no permissions to run the 'delifeq' command".into());
        assert_eq!(Release::of_compare_and_delete(denied), Release::ByScript);
        let oom = Answer::Failed("OOM command not allowed".into());
        assert_eq!(
            Release::of_compare_and_delete(oom),
            Release::Failed { cause: Some("OOM command not allowed".into()) }
        );
        assert_eq!(Release::of_compare_and_delete(Answer::Fallback), Release::Fallback);
        assert_eq!(Release::of_compare_and_delete(Answer::TimedOut), Release::Failed { cause: None });
    }
}
