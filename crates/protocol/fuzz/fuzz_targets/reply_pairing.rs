//! The pairing of replies with calls (direct/awaited.rs) on arbitrary commands written and replies read, in any
//! order: no panic, and against a model, each reply completes the first command awaiting it when it is its last (a
//! script call's one; an acquisition's last command's) and then gives exactly one reply per call of that command, none
//! before; a reply no command awaits is an error.

#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use snatch_protocol::acquisition;
use snatch_protocol::direct::awaited::AwaitedReplies;
use snatch_protocol::resp::Reply;
use std::collections::VecDeque;

/// A reply read, of each kind a socket of direct calls can get.
#[derive(Debug, Arbitrary)]
enum Read {
    Int(i64),
    Status,
    Error(bool),
    Nil,
    Other,
    /// An array of this many integers, or of as many nils (a script call's for several releases holds integers).
    Array(u8, bool),
}

impl Read {
    fn reply(&self) -> Reply {
        match *self {
            Read::Int(n) => Reply::Int(n),
            Read::Status => Reply::Status("OK".into()),
            Read::Error(oom) => Reply::Error(if oom { "OOM command not allowed" } else { "WRONGTYPE" }.into()),
            Read::Nil => Reply::Nil,
            Read::Other => Reply::Other,
            Read::Array(len, nils) => {
                Reply::Array((0..len).map(|n| if nils && n % 3 == 0 { Reply::Nil } else { Reply::Int(1) }).collect())
            }
        }
    }
}

/// What happens on the socket.
#[derive(Debug, Arbitrary)]
enum Event {
    /// A script call for this many calls (mod 16) is written.
    Script(u8),
    /// An acquisition is written: its commands keep the fence counter (all of them) or not (all but the last).
    Acquisition(bool),
    /// A reply is read.
    Read(Read),
}

fuzz_target!(|events: Vec<Event>| {
    let mut awaited = AwaitedReplies::default();
    // For each command written, the replies it still awaits and how many calls it answers.
    let mut model: VecDeque<(usize, usize)> = VecDeque::new();
    for event in events {
        match event {
            Event::Script(calls) => {
                let calls = usize::from(calls % 16);
                awaited.command(calls);
                model.push_back((1, calls));
            }
            Event::Acquisition(keep_counter) => {
                let commands = acquisition::COMMANDS.len() - usize::from(!keep_counter);
                awaited.acquisition(commands);
                model.push_back((commands, 1));
            }
            Event::Read(read) => {
                let answers = awaited.take(read.reply()).map(|answers| answers.len());
                let Some((left, calls)) = model.front_mut() else {
                    assert!(answers.is_err(), "a reply no command awaits: {answers:?}");
                    continue;
                };
                *left -= 1;
                let expected = if *left == 0 { *calls } else { 0 };
                if *left == 0 {
                    model.pop_front();
                }
                assert_eq!(answers, Ok(expected));
            }
        }
    }
});
