//! The replies a socket of direct calls awaits (see commands.rs), in the order its commands were written, and which
//! calls each answers: a release script called for several locks answers them all with one reply; a transaction of
//! acquisitions answers with `MULTI`'s reply, one per queued command (those of protocol/acquisition.rs for each
//! acquisition) and `EXEC`'s, which come to one per acquisition.

use crate::acquisition;
use crate::resp::{ProtocolError, Reply};
use std::collections::VecDeque;

/// A command written for direct calls, or a transaction of them.
#[derive(Debug, Clone, Copy)]
enum Written {
    /// A script call for this many calls: one reply, split among them with [`Reply::into_parts`].
    Script(usize),
    /// `MULTI`, [`acquisition::COMMANDS`] for each of this many acquisitions, `EXEC`.
    Acquisitions(usize),
}

/// The commands written on a socket of direct calls whose replies have not all been read.
#[derive(Debug, Default)]
pub struct AwaitedReplies {
    written: VecDeque<Written>,
    /// How many replies of the first transaction were read (`MULTI`'s and the queued commands').
    read: usize,
    /// The first error among them: why `EXEC` discards the transaction.
    refused: Option<Reply>,
}

impl AwaitedReplies {
    /// Awaits the reply of a script call for `calls` calls.
    pub fn script(&mut self, calls: usize) {
        self.written.push_back(Written::Script(calls));
    }

    /// Awaits the replies of a transaction of `calls` acquisitions.
    pub fn acquisitions(&mut self, calls: usize) {
        self.written.push_back(Written::Acquisitions(calls));
    }

    /// Takes the next reply read. Returns the replies of the calls it completes, in order: none while a
    /// transaction's replies are still coming. An error when no command awaits a reply.
    pub fn take(&mut self, reply: Reply) -> Result<Vec<Reply>, ProtocolError> {
        let Some(&written) = self.written.front() else {
            return Err(ProtocolError("a reply no command awaits".to_owned()));
        };
        match written {
            Written::Script(calls) => {
                self.written.pop_front();
                Ok(reply.into_parts(calls))
            }
            Written::Acquisitions(calls) if self.read < 1 + acquisition::COMMANDS.len() * calls => {
                self.read += 1;
                if matches!(reply, Reply::Error(_)) && self.refused.is_none() {
                    self.refused = Some(reply);
                }
                Ok(Vec::new())
            }
            Written::Acquisitions(calls) => {
                self.written.pop_front();
                self.read = 0;
                Ok(acquisitions(reply, self.refused.take(), calls))
            }
        }
    }
}

/// Each acquisition's reply from `EXEC`'s: see [`acquisition::outcome`]. When the transaction was discarded (a command
/// was refused when queued, say for want of memory), each gets the refusal, which says more than `EXECABORT`.
fn acquisitions(exec: Reply, refused: Option<Reply>, calls: usize) -> Vec<Reply> {
    match exec {
        Reply::Array(replies) if replies.len() == acquisition::COMMANDS.len() * calls => {
            let mut replies = replies.into_iter();
            std::iter::from_fn(|| Some(acquisition::outcome(replies.next()?, replies.next()?, replies.next()?)))
                .collect()
        }
        exec => vec![refused.unwrap_or(exec); calls],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(awaited: &mut AwaitedReplies, count: usize) {
        assert_eq!(awaited.take(Reply::Status("OK".into())), Ok(vec![]));
        for _ in 0..count {
            assert_eq!(awaited.take(Reply::Status("QUEUED".into())), Ok(vec![]));
        }
    }

    #[test]
    fn a_transaction_of_acquisitions_answers_each_once_exec_has_answered() {
        let mut awaited = AwaitedReplies::default();
        awaited.acquisitions(3);
        awaited.script(2);
        queued(&mut awaited, 9);
        let wrongtype = Reply::Error("WRONGTYPE".into());
        let exec = Reply::Array(vec![
            Reply::Nil,
            Reply::Int(7),
            Reply::Int(1),
            Reply::Other,
            Reply::Int(3),
            Reply::Int(1),
            wrongtype.clone(),
            Reply::Int(1),
            Reply::Int(1),
        ]);
        assert_eq!(awaited.take(exec), Ok(vec![Reply::Int(7), Reply::Int(-1), wrongtype]));
        let released = Reply::Array(vec![Reply::Int(1), Reply::Int(0)]);
        assert_eq!(awaited.take(released), Ok(vec![Reply::Int(1), Reply::Int(0)]));
        assert!(awaited.take(Reply::Int(1)).is_err(), "no command awaits another reply");
    }

    #[test]
    fn a_discarded_transaction_gives_each_acquisition_the_refusal() {
        let mut awaited = AwaitedReplies::default();
        awaited.acquisitions(2);
        let oom = Reply::Error("OOM command not allowed".into());
        assert_eq!(awaited.take(Reply::Status("OK".into())), Ok(vec![]));
        let queued_ = || Reply::Status("QUEUED".into());
        for reply in [oom.clone(), queued_(), queued_(), oom.clone(), queued_(), queued_()] {
            assert_eq!(awaited.take(reply), Ok(vec![]));
        }
        let abort = Reply::Error("EXECABORT Transaction discarded".into());
        assert_eq!(awaited.take(abort), Ok(vec![oom.clone(), oom]));
    }
}
