//! Leaders, without I/O: the names beside a leader's lock (its term, its leader channel), what a term says, who leads
//! as a read finds it, and why a term ends. A leader holds the lock of its name for its **term**, whose number is the
//! fence of that lock's acquisition; the term is kept beside the lock so that an observer can tell it, and every change
//! is published on the leader channel, so that observers hear of it when it happens rather than by asking.

use crate::error::SnatchError;
use crate::keys::LockKeys;
use crate::owner;

/// The Redis names of a leadership: its lock, its term and its leader channel (all in the lock's slot).
#[derive(Debug, Clone)]
pub struct LeaderKeys {
    pub lock: LockKeys,
    /// Where the term of the lock's holder is kept (`{lock}:term`).
    pub term: String,
    /// Where a term's beginning and end are published (`{lock}:leader`).
    pub channel: String,
}

impl LeaderKeys {
    /// The names of leadership `name` under `prefix` (`one_slot` on a Redis Cluster).
    pub fn new(prefix: &str, name: &str, one_slot: bool) -> Result<Self, SnatchError> {
        let lock = LockKeys::new(prefix, name, one_slot)?;
        let (term, channel) = (lock.companion("term", one_slot), lock.companion("leader", one_slot));
        Ok(Self { lock, term, channel })
    }
}

/// What a term keeps beside its lock: the lock's token and the term's number, `<token>:<fence>`.
pub fn term(token: &str, fence: i64) -> String {
    format!("{token}:{fence}")
}

/// Who leads, as a read of the lock and its term finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leading {
    /// The leader's instance id, when its lock's value says.
    pub leader: Option<String>,
    /// Its term, when the term kept beside the lock is the holder's (it is written right after the election).
    pub term: Option<i64>,
    /// The lease left, in ms.
    pub ttl_ms: i64,
}

impl Leading {
    /// The read's reply (`value`, `pttl`, `term`: '' for what is not there); `None` without a leader.
    pub fn of(value: &str, pttl: i64, term: &str) -> Option<Self> {
        if value.is_empty() || pttl == -2 {
            return None;
        }
        let token = owner::token(value.strip_suffix('*').unwrap_or(value));
        let fence = term.strip_prefix(token).and_then(|rest| rest.strip_prefix(':')).and_then(|n| n.parse().ok());
        Some(Self { leader: owner::holder(value).map(str::to_owned), term: fence, ttl_ms: pttl.max(0) })
    }
}

/// Why a term ended, as the caller hears it (`'revoked'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// fn settled by itself.
    Returned,
    /// The leader resigned (`resign()`): another replica may take over.
    Resigned,
    /// The campaign stopped (`stop()`, or the locker closed).
    Stopped,
    /// The lease could not be kept.
    Lost,
    /// fn threw or rejected.
    Error,
}

impl Revoked {
    /// Its name, as the caller hears it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Returned => "returned",
            Self::Resigned => "resigned",
            Self::Stopped => "stopped",
            Self::Lost => "lost",
            Self::Error => "error",
        }
    }

    /// How a term ended: its lease `lost`, fn `failed` or not, the leader having asked it to end (`asked`: resigned
    /// or stopped). A loss decides over the rest; fn's rejection once asked to end is its answer, not an error.
    pub fn of(lost: bool, failed: bool, asked: Option<Revoked>) -> Self {
        match (lost, asked, failed) {
            (true, ..) => Self::Lost,
            (false, Some(asked), _) => asked,
            (false, None, true) => Self::Error,
            (false, None, false) => Self::Returned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_read_tells_the_leader_and_its_term_when_the_term_is_the_holder_s() {
        let value = owner::owner(TOKEN, "web-1");
        let read = Leading::of(&value, 900, &term(TOKEN, 42));
        assert_eq!(read, Some(Leading { leader: Some("web-1".into()), term: Some(42), ttl_ms: 900 }));
        let marked = Leading::of(&format!("{value}*"), 900, &term(TOKEN, 42)).unwrap();
        assert_eq!(marked.term, Some(42), "a waiter's mark changes nothing");
        let other = Leading::of(&value, 900, &term("fedcba9876543210fedcba9876543210", 41)).unwrap();
        assert_eq!(other.term, None, "an earlier term's, not yet written over");
        assert_eq!(Leading::of("", -2, ""), None);
    }

    #[test]
    fn the_names_are_beside_the_lock() {
        let keys = LeaderKeys::new("snatch:", "report", false).unwrap();
        assert_eq!((keys.term.as_str(), keys.channel.as_str()), ("{snatch:report}:term", "{snatch:report}:leader"));
    }

    #[test]
    fn a_loss_decides_over_an_ask_and_an_ask_over_fn_s_answer() {
        assert_eq!(Revoked::of(true, false, Some(Revoked::Resigned)), Revoked::Lost);
        assert_eq!(Revoked::of(false, true, Some(Revoked::Stopped)), Revoked::Stopped);
        assert_eq!(Revoked::of(false, true, None), Revoked::Error);
        assert_eq!(Revoked::of(false, false, None), Revoked::Returned);
    }
}
