//! The replies a socket of direct calls awaits (see commands.rs), in the order its commands were written, and which
//! calls each answers: a command answers its call with one reply (a release script called for several locks answers
//! them all with it); an acquisition's
//! commands (those of protocol/acquisition.rs) answer it together, once the last has answered.

use crate::acquisition;
use crate::resp::{ProtocolError, Reply};
use std::collections::VecDeque;

/// A command written for direct calls, or an acquisition's commands.
#[derive(Debug, Clone, Copy)]
enum Written {
    /// A command (a script call, or a compare-and-delete) for this many calls: one reply, split among them with
    /// [`Reply::into_parts`].
    Command(usize),
    /// One acquisition's commands, this many of [`acquisition::COMMANDS`].
    Acquisition(usize),
}

/// The commands written on a socket of direct calls whose replies have not all been read.
#[derive(Debug, Default)]
pub struct AwaitedReplies {
    written: VecDeque<Written>,
    /// The replies read of the first acquisition's commands.
    parts: Vec<Reply>,
}

impl AwaitedReplies {
    /// Awaits the reply of a command for `calls` calls.
    pub fn command(&mut self, calls: usize) {
        self.written.push_back(Written::Command(calls));
    }

    /// Awaits the replies of an acquisition's `commands` commands (the first ones of [`acquisition::COMMANDS`]).
    pub fn acquisition(&mut self, commands: usize) {
        self.written.push_back(Written::Acquisition(commands));
    }

    /// Takes the next reply read. Returns the replies of the calls it completes, in order: none while an
    /// acquisition's replies are still coming. An error when no command awaits a reply.
    pub fn take(&mut self, reply: Reply) -> Result<Vec<Reply>, ProtocolError> {
        let Some(&written) = self.written.front() else {
            return Err(ProtocolError("a reply no command awaits".to_owned()));
        };
        match written {
            Written::Command(calls) => {
                self.written.pop_front();
                Ok(reply.into_parts(calls))
            }
            Written::Acquisition(commands) => {
                self.parts.push(reply);
                if self.parts.len() < commands {
                    return Ok(Vec::new());
                }
                self.written.pop_front();
                let mut parts = self.parts.drain(..);
                let (Some(set), Some(incr)) = (parts.next(), parts.next()) else {
                    return Err(ProtocolError("an acquisition of fewer than two commands".to_owned()));
                };
                let pexpire = parts.next();
                Ok(vec![acquisition::outcome(set, incr, pexpire)])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acquisition_is_answered_once_its_last_command_has_answered() {
        let mut awaited = AwaitedReplies::default();
        awaited.acquisition(3);
        awaited.acquisition(2);
        awaited.command(2);
        awaited.acquisition(3);
        assert_eq!(awaited.take(Reply::Nil), Ok(vec![]));
        assert_eq!(awaited.take(Reply::Int(7)), Ok(vec![]));
        assert_eq!(awaited.take(Reply::Int(1)), Ok(vec![Reply::Int(7)]), "free: the fence");
        assert_eq!(awaited.take(Reply::Other), Ok(vec![]));
        assert_eq!(awaited.take(Reply::Int(8)), Ok(vec![Reply::Int(-1)]), "held, without keeping the counter");
        let released = Reply::Array(vec![Reply::Int(1), Reply::Int(0)]);
        assert_eq!(awaited.take(released), Ok(vec![Reply::Int(1), Reply::Int(0)]));
        let oom = Reply::Error("OOM command not allowed".into());
        assert_eq!(awaited.take(Reply::Nil), Ok(vec![]));
        assert_eq!(awaited.take(oom.clone()), Ok(vec![]));
        assert_eq!(awaited.take(oom.clone()), Ok(vec![oom]), "taken but not counted: the error");
        assert!(awaited.take(Reply::Int(1)).is_err(), "no command awaits another reply");
    }
}
