//! The protocol of one socket of direct calls, without the socket (sans-IO): which calls are written together, the
//! bytes to write, the bytes read turned into replies paired with their calls, the calls' deadlines, and the calls
//! in flight when the socket fails. The caller moves the bytes between the session and its socket and tells the
//! time; the Node binding does it from node's event loop (its src/loop_socket.rs).

use crate::direct::awaited::AwaitedReplies;
use crate::direct::commands::{write_commands, DirectCall};
use crate::offers::Offers;
use crate::resp::{parse, ProtocolError, Reply};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// While replies are handed out, the calls they lead to are written this many at a time rather than all at the
/// end, so that Redis works on the first ones while the caller makes the rest, instead of node and Redis taking turns
/// (bench/README.md, profile steps 15 and 26); or half as many as those written before and still awaiting their
/// replies, if more: Redis then still has those to work on, and fewer, larger writes cost it fewer reads (over TLS
/// each write is a record, which Redis reads alone; profile step 28). Consecutive releases among them go as one
/// command ([`write_commands`]). Not on a cluster master: there the calls spread over the masters, each command is a
/// call's own, and a socket that writes only once the replies are all handed out wakes its master less often for the
/// same work (bench/results/2026-11-26-cluster-writes.md).
const WRITE_EVERY: usize = 12;

/// Bytes of room for reads, to start with (more when one reply is longer).
const READ_ROOM: usize = 16 * 1024;

/// A call's reply, or why it has none.
pub type CallReply = Result<Reply, NoReply>;

/// Why a direct call got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {
    /// The socket failed first: whether Redis ran the call is not known. Made again on the locker's own connection
    /// with the same token, it is safe (an acquisition asked again with its token finds the key ours and keeps it).
    Dropped,
    /// The command timeout passed: the call fails and is not made again, as on the locker's own connection.
    TimedOut,
}

/// When the oldest call in flight runs out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// No call is in flight.
    Idle,
    /// It has passed: the socket must fail with [`NoReply::TimedOut`].
    Passed,
    /// In this long.
    In(Duration),
}

/// The calls of one socket, from their command to their reply. `C` is what a call carries until its reply.
pub struct DirectSession<C> {
    /// Calls in the order of their replies, with their deadlines; the last `unwritten` are not encoded yet, and get
    /// their deadline when they are (one clock read for the calls encoded together).
    pending: VecDeque<(Option<Instant>, C)>,
    /// Calls not encoded yet, at the end of `pending`.
    unwritten: usize,
    /// The replies of the commands encoded, and how many calls each answers.
    awaited: AwaitedReplies,
    /// Encoded and not yet taken by the socket.
    unsent: Vec<u8>,
    /// Read and not yet parsed.
    received: Received,
    timeout: Duration,
    /// A single server's socket: consecutive releases share a command, and calls made while replies are handed out are
    /// written a few at a time ([`push`](Self::push)). A cluster master's does neither (see [`write_commands`]).
    group: bool,
    /// Replies are being handed out (see [`push`](Self::push)).
    dispatching: bool,
    /// The server's own commands it offers (the handshake's finding).
    offers: Offers,
}

impl<C: DirectCall> DirectSession<C> {
    /// A session whose calls have `timeout` each, from when they are encoded; `group` for a single server's socket, not
    /// a cluster master's (see [`write_commands`] and [`push`](Self::push)); on a server that offers `offers`.
    pub fn new(timeout: Duration, group: bool, offers: Offers) -> Self {
        Self {
            pending: VecDeque::new(),
            unwritten: 0,
            awaited: AwaitedReplies::default(),
            unsent: Vec::new(),
            received: Received::new(),
            timeout,
            group,
            dispatching: false,
            offers,
        }
    }

    /// The timeout of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// No call is in flight (none waits for a reply).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Takes `call`, to be encoded. True when the calls not encoded yet should be encoded and written now ([`encode`]):
    /// at once, except while replies are handed out: then on a single server every [`WRITE_EVERY`] calls (or half as
    /// many as those awaiting replies, if more), and on a cluster master not (the caller writes them all once the
    /// replies are handed out).
    ///
    /// [`encode`]: Self::encode
    pub fn push(&mut self, call: C) -> bool {
        self.pending.push_back((None, call));
        self.unwritten += 1;
        let every = WRITE_EVERY.max((self.pending.len() - self.unwritten) / 2);
        !self.dispatching || (self.group && self.unwritten >= every)
    }

    /// Replies are being handed out (`true`) or no longer (`false`): see [`push`](Self::push). The caller encodes
    /// what was pushed meanwhile once this ends.
    pub fn set_dispatching(&mut self, dispatching: bool) {
        self.dispatching = dispatching;
    }

    /// Encodes the calls not encoded yet after the bytes not sent yet; their deadline is `timeout` after `now`,
    /// which is asked only when there is something to encode (one clock read for the calls encoded together). Each
    /// call hears when it was encoded ([`DirectCall::encoded`]).
    pub fn encode(&mut self, now: impl FnOnce() -> Instant) {
        if self.unwritten == 0 {
            return;
        }
        let first = self.pending.len() - self.unwritten;
        let at = now();
        let deadline = at + self.timeout;
        for (call_deadline, call) in self.pending.range_mut(first..) {
            *call_deadline = Some(deadline);
            call.encoded(at, self.offers);
        }
        write_commands(
            self.pending.range(first..).map(|(_, call)| call),
            &mut self.unsent,
            &mut self.awaited,
            self.group,
        );
        self.unwritten = 0;
    }

    /// The bytes to write to the socket.
    pub fn unsent(&self) -> &[u8] {
        &self.unsent
    }

    /// The socket took the first `n` bytes of [`unsent`](Self::unsent).
    pub fn sent(&mut self, n: usize) {
        self.unsent.drain(..n);
    }

    /// Room for the next read from the socket; [`received`](Self::received) says how much was read into it.
    pub fn read_room(&mut self) -> &mut [u8] {
        self.received.room()
    }

    /// `n` bytes were read into [`read_room`](Self::read_room).
    pub fn received(&mut self, n: usize) {
        self.received.end += n;
    }

    /// Appends to `replies` each call whose reply is complete, with its reply, in order. An error when a reply
    /// makes no sense or answers no call: the socket must fail (the calls before it are still taken).
    pub fn take_replies(&mut self, replies: &mut Vec<(C, CallReply)>) -> Result<(), ProtocolError> {
        let mut at = 0;
        let result = loop {
            match parse(&self.received.unparsed()[at..]) {
                Ok(Some((reply, len))) => {
                    let answers = match self.awaited.take(reply) {
                        Ok(answers) if answers.len() <= self.pending.len() => answers,
                        Ok(_) => break Err(ProtocolError("a reply for more calls than are in flight".to_owned())),
                        Err(e) => break Err(e),
                    };
                    at += len;
                    let calls = self.pending.drain(..answers.len()).map(|(_, call)| call);
                    replies.extend(calls.zip(answers.into_iter().map(Ok)));
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.received.consume(at);
        result
    }

    /// When the oldest call in flight runs out of time, as of `now`. A call not encoded yet (which the caller
    /// encodes before it returns to its loop) has the whole timeout ahead.
    pub fn deadline(&self, now: Instant) -> Deadline {
        match self.pending.front() {
            None => Deadline::Idle,
            Some((deadline, _)) => {
                let left = deadline.map_or(self.timeout, |at| at.saturating_duration_since(now));
                if left.is_zero() {
                    Deadline::Passed
                } else {
                    Deadline::In(left)
                }
            }
        }
    }

    /// The socket failed (`why`): every call in flight, without a reply, in order. A new socket gets a new session.
    pub fn fail(self, why: NoReply) -> Vec<(C, CallReply)> {
        self.pending.into_iter().map(|(_, call)| (call, Err(why))).collect()
    }
}

/// What was read and not parsed yet, `bytes[start..end]`; reads land after it, in room zeroed once (when allocated
/// or grown) rather than for every read, without a copy.
struct Received {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Received {
    fn new() -> Self {
        Self { bytes: vec![0; READ_ROOM], start: 0, end: 0 }
    }

    /// Room for the next read: what is left after `end`, made by moving what is unparsed to the front when there is
    /// none, or by growing when that is all of it.
    fn room(&mut self) -> &mut [u8] {
        if self.end == self.bytes.len() {
            if self.start > 0 {
                self.bytes.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.bytes.resize(self.bytes.len() * 2, 0);
            }
        }
        &mut self.bytes[self.end..]
    }

    fn unparsed(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    /// The first `n` unparsed bytes were parsed.
    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct::commands::DirectCommand;

    /// A call as a test keeps it: a release, and when it was encoded.
    #[derive(Debug, Default)]
    struct Call {
        encoded: Option<Instant>,
    }

    impl DirectCall for Call {
        fn command(&self) -> DirectCommand<'_> {
            DirectCommand::Release { lock: "lock", token: "token", cluster: false }
        }

        fn encoded(&mut self, at: Instant, _: Offers) {
            self.encoded = Some(at);
        }
    }

    #[test]
    fn a_deadline_counts_from_when_the_calls_are_encoded_and_failing_hands_back_every_call() {
        let timeout = Duration::from_millis(1000);
        let mut session = DirectSession::new(timeout, true, Offers::default());
        let start = Instant::now();
        assert_eq!(session.deadline(start), Deadline::Idle);
        assert!(session.push(Call::default()));
        assert_eq!(
            session.deadline(start + timeout * 2),
            Deadline::In(timeout),
            "not encoded: the whole timeout ahead"
        );
        session.encode(|| start);
        assert!(session.push(Call::default()));
        assert_eq!(session.deadline(start + Duration::from_millis(400)), Deadline::In(Duration::from_millis(600)));
        assert_eq!(session.deadline(start + timeout), Deadline::Passed, "the oldest call's deadline");
        let failed = session.fail(NoReply::TimedOut);
        assert_eq!(failed.len(), 2, "the encoded call and the one not encoded yet");
        assert_eq!(failed[0].0.encoded, Some(start), "told when it was encoded");
        assert_eq!(failed[1].0.encoded, None);
        assert!(failed.iter().all(|(_, reply)| *reply == Err(NoReply::TimedOut)));
    }

    #[test]
    fn while_replies_are_handed_out_calls_are_written_twelve_at_a_time() {
        let mut session = DirectSession::new(Duration::from_secs(1), true, Offers::default());
        session.set_dispatching(true);
        let writes: Vec<bool> = (0..13).map(|_| session.push(Call::default())).collect();
        assert_eq!(writes.iter().filter(|w| **w).count(), 2, "{writes:?}");
        assert!(writes[11] && writes[12], "the twelfth and every one after until encoded: {writes:?}");
        session.encode(Instant::now);
        assert!(!session.push(Call::default()), "counted afresh after encoding");
        session.set_dispatching(false);
        assert!(session.push(Call::default()), "at once when no replies are handed out");
    }

    #[test]
    fn with_many_awaiting_replies_calls_made_while_replies_are_handed_out_are_written_half_as_many_at_a_time() {
        let mut session = DirectSession::new(Duration::from_secs(1), true, Offers::default());
        for _ in 0..60 {
            session.push(Call::default());
        }
        session.encode(Instant::now);
        session.set_dispatching(true);
        let writes: Vec<bool> = (0..31).map(|_| session.push(Call::default())).collect();
        assert_eq!(writes.iter().position(|w| *w), Some(29), "the 30th, with 60 awaiting replies: {writes:?}");
    }

    #[test]
    fn on_a_cluster_master_calls_made_while_replies_are_handed_out_wait_for_the_end() {
        let mut session = DirectSession::new(Duration::from_secs(1), false, Offers::default());
        session.set_dispatching(true);
        assert!((0..100).all(|_| !session.push(Call::default())), "none written while replies are handed out");
        session.set_dispatching(false);
        assert!(session.push(Call::default()), "at once when no replies are handed out");
    }

    #[test]
    fn consecutive_releases_share_one_script_call_and_each_gets_its_part_of_the_reply() {
        let mut session = DirectSession::new(Duration::from_secs(1), true, Offers::default());
        for _ in 0..3 {
            session.push(Call::default());
        }
        session.encode(Instant::now);
        let written = String::from_utf8_lossy(session.unsent()).into_owned();
        assert_eq!(written.matches("EVALSHA").count(), 1, "{written}");
        let n = session.unsent().len();
        session.sent(n);
        let reply = b"*3\r\n:1\r\n:0\r\n:1\r\n";
        session.read_room()[..reply.len()].copy_from_slice(reply);
        session.received(reply.len());
        let mut replies = Vec::new();
        session.take_replies(&mut replies).unwrap();
        let replies: Vec<CallReply> = replies.into_iter().map(|(_, reply)| reply).collect();
        assert_eq!(replies, [Ok(Reply::Int(1)), Ok(Reply::Int(0)), Ok(Reply::Int(1))]);
        assert!(session.is_idle());
    }

    #[test]
    fn a_reply_no_call_awaits_fails_the_session() {
        let mut session = DirectSession::<Call>::new(Duration::from_secs(1), true, Offers::default());
        let reply = b"+OK\r\n";
        session.read_room()[..reply.len()].copy_from_slice(reply);
        session.received(reply.len());
        let mut replies = Vec::new();
        assert!(session.take_replies(&mut replies).is_err());
        assert!(replies.is_empty());
    }
}
