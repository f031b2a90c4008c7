//! A Redis socket that node's own event loop polls (libuv's `uv_poll`), for the core's direct calls
//! (snatch_core::DirectAcquire): commands are written from the JS thread and the replies are read and handed to JS in
//! the loop's callback, with no hop between threads either way. One per server (per master on a cluster). Opened on the
//! runtime (`Locker::direct_socket`), then handed to the loop; not ready while opening, and again for a second after
//! a failure, when callers use the locker's own connection. This file only moves bytes and time between libuv and
//! the core's `DirectSession`, which holds the protocol: which calls are written together, replies paired with
//! calls, deadlines (when one passes, or the socket fails, the socket is closed and every call in flight goes to the
//! handler without a reply: `NoReply` says what becomes of it). Unix only; the handles are unreferenced (the facade
//! keeps the process alive while calls are pending) and closed with the socket, or when the JS environment is torn
//! down.
//!
//! The loop's poll and timer are ffi's `LoopWatch`; when the running libuv is not the one it expects, no socket is
//! installed (calls take the locker's own connection).

use crate::ffi::uv::{LoopWatch, Watcher};
use napi::bindgen_prelude::spawn;
use napi::Env;
use snatch_core::protocol::direct::commands::DirectCall;
use snatch_core::protocol::direct::session::{CallReply, Deadline, DirectSession, NoReply};
use snatch_core::protocol::direct::target::DirectTarget;
use snatch_core::{DirectStream, Locker, SnatchError};
use std::cell::{Cell, RefCell};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after a failure the socket is not opened again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Receives replies on the JS thread, inside a handle scope. Calls made meanwhile are sent
/// together when it returns.
pub(crate) type Handler<C> = Box<dyn Fn(Vec<(C, CallReply)>)>;

/// The sockets of one locker (a cluster's masters). While one of them hands replies out, the calls made meanwhile go
/// out on every one of them as on that one ([`DirectSession::push`]: a few at a time), and the rest once the replies
/// are handed out: a master's replies lead to calls on the others, which would otherwise be written one by one.
pub(crate) struct SocketSet<C: DirectCall + 'static> {
    /// How many sockets are handing replies out (nested when a failure's calls are handed out meanwhile).
    dispatching: Cell<u32>,
    /// The sockets that were opened (those closed since are passed over).
    open: RefCell<Vec<Weak<RefCell<State<C>>>>>,
}

impl<C: DirectCall + 'static> Default for SocketSet<C> {
    fn default() -> Self {
        Self { dispatching: Cell::new(0), open: RefCell::new(Vec::new()) }
    }
}

impl<C: DirectCall + 'static> SocketSet<C> {
    /// `socket` opened (again: a socket that failed opens again after a while).
    fn join(&self, socket: &Rc<RefCell<State<C>>>) {
        let mut open = self.open.borrow_mut();
        if !open.iter().any(|known| std::ptr::eq(known.as_ptr(), Rc::as_ptr(socket))) {
            open.push(Rc::downgrade(socket));
        }
    }

    /// The sockets, those dropped forgotten: a copy, as closing one hands its calls out, which may open another.
    fn sockets(&self) -> Vec<Rc<RefCell<State<C>>>> {
        let mut open = self.open.borrow_mut();
        open.retain(|socket| socket.strong_count() > 0);
        open.iter().filter_map(Weak::upgrade).collect()
    }

    /// A socket starts handing replies out: the first to do so has every socket hold its calls.
    fn begin(&self) {
        self.dispatching.set(self.dispatching.get() + 1);
        if self.dispatching.get() == 1 {
            // Nothing here hands replies out or opens a socket: the list is read as it is, without a copy.
            for socket in self.open.borrow().iter().filter_map(Weak::upgrade) {
                if let Phase::Open(open) = &mut socket.borrow_mut().phase {
                    open.session.set_dispatching(true);
                }
            }
        }
    }

    /// A socket handed its replies out: the last to do so has every socket write what it holds, and close if it is
    /// closing and nothing is in flight any more. With several sockets (a cluster's masters), they write once the
    /// loop has handled what its poll found: the other sockets' replies lead to more calls, written with these.
    fn end(&self) {
        self.dispatching.set(self.dispatching.get() - 1);
        if self.dispatching.get() > 0 {
            return;
        }
        let sockets = self.sockets();
        let later = sockets.len() > 1;
        for socket in sockets {
            let mut guard = socket.borrow_mut();
            let closing = guard.closing;
            let Phase::Open(open) = &mut guard.phase else { continue };
            open.session.set_dispatching(false);
            let written = if later { open.watch.check() } else { flush(open).is_ok() };
            let idle = open.session.is_idle();
            drop(guard);
            if !written {
                fail(&socket, NoReply::Dropped);
            } else if closing && idle {
                shut(&socket);
            }
        }
    }
}

/// The socket of one locker; `C` is what a call carries until its reply. Clones are handles to the same socket.
pub(crate) struct LoopSocket<C: DirectCall + 'static> {
    state: Rc<RefCell<State<C>>>,
}

impl<C: DirectCall + 'static> Clone for LoopSocket<C> {
    fn clone(&self) -> Self {
        Self { state: self.state.clone() }
    }
}

struct State<C: DirectCall + 'static> {
    env: Env,
    /// The locker whose calls the socket carries (it opens the socket).
    locker: Locker,
    phase: Phase<C>,
    /// What the socket connects to.
    target: DirectTarget,
    /// A single server's socket, not a cluster master's: consecutive releases share a command, and calls made
    /// while replies are handed out are written a few at a time (snatch-protocol's `DirectSession::push`).
    group: bool,
    timeout: Duration,
    handler: Rc<Handler<C>>,
    /// The locker's sockets, this one among them once open.
    set: Rc<SocketSet<C>>,
    /// No more calls: the socket closes once the last reply is in, and is not opened again.
    closing: bool,
}

/// The socket opened on the runtime, for the JS thread to take.
type Opened = Arc<Mutex<Option<Result<Option<DirectStream>, SnatchError>>>>;

/// One per locker: boxing the open socket would cost every call a pointer chase for no memory worth saving.
#[allow(clippy::large_enum_variant)]
enum Phase<C: DirectCall + 'static> {
    /// Not open; opened by the first call after `reopen_at`.
    Closed {
        reopen_at: Option<Instant>,
    },
    Opening(Opened),
    Open(Open<C>),
    /// Direct calls do not apply to this locker (Redlock, a cluster or Sentinel, waitReplicas, a Unix socket URL).
    Unavailable,
}

struct Open<C: DirectCall + 'static> {
    /// The socket's poll and the deadlines' timer on node's loop; dropped before the stream, which closes the socket.
    watch: LoopWatch<RefCell<State<C>>>,
    stream: DirectStream,
    /// The calls in flight on this socket, and the bytes on their way.
    session: DirectSession<C>,
    /// Waiting for the socket to take the rest of the session's bytes.
    writable_wanted: bool,
}

impl<C: DirectCall + 'static> LoopSocket<C> {
    /// A socket to `target` for calls with `timeout` as deadline, replies going to `handler`, one of `set`. Nothing
    /// opens yet.
    pub(crate) fn new(
        env: Env,
        locker: Locker,
        target: DirectTarget,
        timeout: Duration,
        handler: Handler<C>,
        set: Rc<SocketSet<C>>,
    ) -> Self {
        let phase = Phase::Closed { reopen_at: None };
        let group = target == DirectTarget::Server;
        let handler = Rc::new(handler);
        let state = State { env, locker, phase, target, group, timeout, handler, set, closing: false };
        Self { state: Rc::new(RefCell::new(state)) }
    }

    /// Whether calls can be sent now. When not, starts opening the socket if it is closed and may be opened again.
    pub(crate) fn ready(&self) -> bool {
        let mut state = self.state.borrow_mut();
        if state.closing {
            return false;
        }
        match &state.phase {
            Phase::Open(_) => return true,
            Phase::Unavailable => return false,
            Phase::Closed { reopen_at } => {
                if reopen_at.is_some_and(|at| Instant::now() < at) || state.locker.is_closed() {
                    return false;
                }
                let (opened, locker, target) = (Opened::default(), state.locker.clone(), state.target.clone());
                state.phase = Phase::Opening(opened.clone());
                spawn(async move {
                    let socket = snatch_core::open_direct_socket(&locker, &target).await;
                    *opened.lock().expect("opened socket poisoned") = Some(socket);
                });
                return false;
            }
            Phase::Opening(opened) => {
                let Some(socket) = opened.lock().expect("opened socket poisoned").take() else { return false };
                state.phase = match socket {
                    Ok(Some(stream)) => match install(&self.state, &state.env, stream, state.timeout, state.group) {
                        Some(mut open) => {
                            open.session.set_dispatching(state.set.dispatching.get() > 0);
                            state.set.join(&self.state);
                            Phase::Open(open)
                        }
                        None => Phase::Unavailable,
                    },
                    Ok(None) => Phase::Unavailable,
                    Err(_) => Phase::Closed { reopen_at: Some(Instant::now() + REOPEN_AFTER) },
                };
            }
        }
        matches!(state.phase, Phase::Open(_))
    }

    /// Sends the command of `call` and keeps it until its reply; `call` is handed back when the socket is not open,
    /// or closes because its deadline cannot be watched. A socket that fails on the write hands `call` to the handler
    /// as failed, with the others in flight.
    pub(crate) fn send(&self, call: C) -> Result<(), C> {
        let mut state = self.state.borrow_mut();
        let Phase::Open(open) = &mut state.phase else { return Err(call) };
        if open.session.is_idle() && !open.watch.start_timer(millis(open.session.timeout())) {
            drop(state);
            fail(&self.state, NoReply::Dropped);
            return Err(call);
        }
        if open.session.push(call) && flush(open).is_err() {
            drop(state);
            fail(&self.state, NoReply::Dropped);
        }
        Ok(())
    }

    /// Closes the socket once no call is in flight (at once if none is); it is not opened again.
    pub(crate) fn close(&self) {
        let mut state = self.state.borrow_mut();
        state.closing = true;
        let idle = match &state.phase {
            Phase::Open(open) => open.session.is_idle(),
            _ => true,
        };
        drop(state);
        if idle {
            shut(&self.state);
        }
    }
}

/// Hands `stream` to the loop of `env` (ffi's `LoopWatch`); its calls have `timeout` each, grouped as `group` says
/// ([`DirectSession::new`]), on the server's own commands it offers. `None` if the watch cannot be installed.
fn install<C: DirectCall + 'static>(
    state: &Rc<RefCell<State<C>>>,
    env: &Env,
    stream: DirectStream,
    timeout: Duration,
    group: bool,
) -> Option<Open<C>> {
    let watch = LoopWatch::install(env, stream.as_raw_fd(), state)?;
    let session = DirectSession::new(timeout, group, stream.offers());
    Some(Open { watch, stream, session, writable_wanted: false })
}

/// Encodes the calls not written yet and writes what the socket takes of the session's bytes, polling for
/// writability while some are left.
fn flush<C: DirectCall + 'static>(open: &mut Open<C>) -> std::io::Result<()> {
    open.session.encode(Instant::now);
    while !open.session.unsent().is_empty() {
        match open.stream.write(open.session.unsent()) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => open.session.sent(n),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    open.stream.send_pending()?;
    let wanted = !open.session.unsent().is_empty() || open.stream.wants_write();
    if wanted != open.writable_wanted {
        if !open.watch.poll(wanted) {
            return Err(std::io::Error::other("libuv refused to poll the socket"));
        }
        open.writable_wanted = wanted;
    }
    Ok(())
}

impl<C: DirectCall + 'static> Watcher for RefCell<State<C>> {
    /// The loop found the socket readable or writable: writes what is left, reads what came, hands out the replies
    /// that are complete; fails the socket on an error or end of stream.
    fn polled(state: &Rc<Self>, failed: bool, readable: bool, writable: bool) {
        let mut replies = Vec::new();
        let healthy = {
            let mut guard = state.borrow_mut();
            let Phase::Open(open) = &mut guard.phase else { return };
            // A read can leave TLS with something to send (its own messages): flushed with the rest.
            !failed
                && (!writable || flush(open).is_ok())
                && (!readable || read(open, &mut replies))
                && (!open.stream.wants_write() || flush(open).is_ok())
        };
        if !replies.is_empty() {
            dispatch(state, replies);
        }
        if !healthy {
            fail(state, NoReply::Dropped);
        }
    }

    /// The timer found the oldest call's deadline: fails the socket if it has passed, else waits for it (or fails the
    /// socket as on a write error if the timer does not start again: the deadlines would go unwatched).
    fn timer(state: &Rc<Self>) {
        let failed = {
            let guard = state.borrow();
            let Phase::Open(open) = &guard.phase else { return };
            match open.session.deadline(Instant::now()) {
                Deadline::Idle => None,
                Deadline::Passed => Some(NoReply::TimedOut),
                Deadline::In(left) => (!open.watch.start_timer(millis(left) + 1)).then_some(NoReply::Dropped),
            }
        };
        if let Some(why) = failed {
            fail(state, why);
        }
    }

    /// The loop handled what its poll found: writes what the socket holds.
    fn checked(state: &Rc<Self>) {
        let flushed = match &mut state.borrow_mut().phase {
            Phase::Open(open) => flush(open).is_ok(),
            _ => true,
        };
        if !flushed {
            fail(state, NoReply::Dropped);
        }
    }

    /// The JS environment is being torn down: closes the socket, dropping the calls in flight (nothing can hear of
    /// them any more). Node waits for the watch's handles to be closed.
    fn torn_down(state: &Rc<Self>) {
        state.borrow_mut().closing = true;
        shut(state);
    }
}

/// Reads everything available and takes the calls whose replies are complete. False when the stream ended or
/// failed, or a reply made no sense (the calls whose replies were complete before are still taken).
fn read<C: DirectCall>(open: &mut Open<C>, replies: &mut Vec<(C, CallReply)>) -> bool {
    let healthy = loop {
        let room = open.session.read_room();
        let space = room.len();
        match open.stream.read(room) {
            Ok(0) => break false,
            Ok(n) => {
                open.session.received(n);
                if n < space {
                    // All there is for now: the loop polls the socket again (level-triggered) if more comes.
                    break true;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    open.session.take_replies(replies).is_ok() && healthy
}

/// `duration` in whole milliseconds, as libuv's timers take it.
fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Hands `replies` to the handler, then (once no socket of the set hands replies out any more) sends what was called
/// meanwhile, and closes the sockets that are closing with nothing in flight any more.
fn dispatch<C: DirectCall + 'static>(state: &Rc<RefCell<State<C>>>, replies: Vec<(C, CallReply)>) {
    let (handler, set) = {
        let guard = state.borrow();
        (guard.handler.clone(), guard.set.clone())
    };
    set.begin();
    handler(replies);
    set.end();
}

/// The socket failed, or a deadline passed (`why`): closes it and hands every call in flight to the handler without a
/// reply. It may be opened again after [`REOPEN_AFTER`].
fn fail<C: DirectCall + 'static>(state: &Rc<RefCell<State<C>>>, why: NoReply) {
    let Some(session) = shut(state) else { return };
    if let Phase::Closed { reopen_at } = &mut state.borrow_mut().phase {
        *reopen_at = Some(Instant::now() + REOPEN_AFTER);
    }
    let failed = session.fail(why);
    if !failed.is_empty() {
        dispatch(state, failed);
    }
}

/// Closes the socket and its watch if it is open (not to be opened again when closing), returning its session with
/// the calls that were in flight.
fn shut<C: DirectCall + 'static>(state: &Rc<RefCell<State<C>>>) -> Option<DirectSession<C>> {
    let mut guard = state.borrow_mut();
    if !matches!(guard.phase, Phase::Open(_)) {
        if guard.closing {
            guard.phase = Phase::Unavailable;
        }
        return None;
    }
    let next = if guard.closing { Phase::Unavailable } else { Phase::Closed { reopen_at: None } };
    let Phase::Open(open) = std::mem::replace(&mut guard.phase, next) else { unreachable!("checked above") };
    drop(guard);
    // The watch closes its handles before the stream closes the socket.
    let Open { watch, stream, session, .. } = open;
    drop(watch);
    drop(stream);
    Some(session)
}
