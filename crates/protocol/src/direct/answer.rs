//! What a direct call's reply, or its absence, says, before what that means for the call's kind: an integer (the
//! acquisition's or the release's reply), a call to make again on the locker's own connection, or a failure.

use crate::direct::session::{CallReply, NoReply};
use crate::resp::Reply;

/// The error replies after which a direct call is made again on the locker's own connection: the server lacks the
/// release script, or (a cluster master) no longer serves the key's slot, or cannot now. The locker's own connection
/// knows what to do about each.
const AGAIN_ON: [&str; 5] = ["NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"];

/// What a direct call's reply comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The integer the call answers with.
    Int(i64),
    /// Make the call again on the locker's own connection, with the same token: the server could not run it there
    /// ([`AGAIN_ON`]), or the socket failed before its reply (whether Redis ran it is not known).
    Again,
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
            Ok(Reply::Error(text)) if AGAIN_ON.iter().any(|code| text.starts_with(code)) => Self::Again,
            Err(NoReply::Dropped) => Self::Again,
            Ok(Reply::Error(text)) => Self::Failed(text),
            Ok(other) => Self::Failed(format!("unexpected reply {other:?}")),
            Err(NoReply::TimedOut) => Self::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirections_and_lost_sockets_go_again_and_the_rest_fails() {
        assert_eq!(Answer::of(Ok(Reply::Int(3))), Answer::Int(3));
        for text in ["NOSCRIPT No matching script", "MOVED 1 h:1", "ASK 1 h:1", "TRYAGAIN x", "CLUSTERDOWN x"] {
            assert_eq!(Answer::of(Ok(Reply::Error(text.into()))), Answer::Again, "{text}");
        }
        assert_eq!(Answer::of(Err(NoReply::Dropped)), Answer::Again);
        assert_eq!(Answer::of(Err(NoReply::TimedOut)), Answer::TimedOut);
        assert_eq!(Answer::of(Ok(Reply::Error("WRONGTYPE".into()))), Answer::Failed("WRONGTYPE".into()));
        assert_eq!(Answer::of(Ok(Reply::Nil)), Answer::Failed("unexpected reply Nil".into()));
    }
}
