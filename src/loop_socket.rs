//! A Redis socket that node's own event loop polls (libuv's `uv_poll`), for the core's direct calls
//! (snatch_core::DirectAcquire): commands are written from the JS thread and the replies are read and handed to JS in
//! the loop's callback, with no thread hand-off either way. One per server (per master on a cluster). Opened on the
//! runtime (`Locker::direct_socket`), then handed to the loop; not ready while opening, and again for a second after
//! a failure, when callers use the locker's own connection. This file only moves bytes and time between libuv and
//! the core's `DirectSession`, which holds the protocol: which calls are written together, replies paired with
//! calls, deadlines (when one passes, or the socket fails, the socket is closed and every call in flight goes to the
//! handler without a reply: `NoReply` says what becomes of it). Unix only; the handles are unreferenced (the facade
//! keeps the process alive while calls are pending) and closed with the socket, or when the JS environment is torn
//! down.
//!
//! The libuv functions and constants used here are declared below, from libuv 1.x's `uv.h`, and resolved from node
//! at load time: napi's `sys` declares only `uv_loop_s` (opaque) and `uv_run`; `libuv-sys2` builds and links a libuv
//! of its own (`links = "uv"`, or the system's through pkg-config), whose handles node's loop cannot take;
//! `libuv-sys-lite`, which links none, has bindgen as a build dependency of every build and libuv 1.48's headers.
//! Before the first socket is installed, [`libuv_matches`] checks the declarations against the running libuv; when
//! they do not match, no socket is installed (calls take the locker's own connection) and stderr says why, once.

use napi::bindgen_prelude::spawn;
use napi::sys;
use snatch_core::protocol::direct::commands::DirectCall;
use snatch_core::protocol::direct::session::{CallReply, Deadline, DirectSession, NoReply};
use snatch_core::protocol::direct::target::DirectTarget;
use snatch_core::{DirectStream, Locker, SnatchError};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// libuv's `uv_handle_t`, only ever behind a pointer: its first field is the public `data` pointer (`UV_HANDLE_FIELDS`
/// in libuv 1.x's `uv.h` starts with `void* data;`, for the user; libuv does not use it).
#[repr(C)]
struct UvHandle {
    data: *mut c_void,
}

extern "C" {
    fn uv_version() -> c_uint;
    fn uv_handle_type_name(kind: c_int) -> *const c_char;
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init_socket(event_loop: *mut sys::uv_loop_s, handle: *mut UvHandle, socket: c_int) -> c_int;
    fn uv_poll_start(
        handle: *mut UvHandle,
        events: c_int,
        callback: extern "C" fn(*mut UvHandle, c_int, c_int),
    ) -> c_int;
    fn uv_timer_init(event_loop: *mut sys::uv_loop_s, handle: *mut UvHandle) -> c_int;
    fn uv_timer_start(
        handle: *mut UvHandle,
        callback: extern "C" fn(*mut UvHandle),
        timeout: u64,
        repeat: u64,
    ) -> c_int;
    fn uv_unref(handle: *mut UvHandle);
    fn uv_close(handle: *mut UvHandle, callback: extern "C" fn(*mut UvHandle));
}

/// `UV_POLL` and `UV_TIMER` of `uv_handle_type`, `UV_READABLE` and `UV_WRITABLE` of `uv_poll_event` (libuv 1.x;
/// the handle types are checked by name in [`libuv_matches`]).
const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

/// How long after a failure the socket is not opened again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Receives replies on the JS thread, inside a handle scope. Calls made meanwhile are sent
/// together when it returns.
pub(crate) type Handler<C> = Box<dyn Fn(Vec<(C, CallReply)>)>;

/// The socket of one locker; `C` is what a call carries until its reply.
pub(crate) struct LoopSocket<C: 'static> {
    state: Rc<RefCell<State<C>>>,
}

struct State<C: 'static> {
    env: sys::napi_env,
    phase: Phase<C>,
    /// What the socket connects to.
    target: DirectTarget,
    /// Whether consecutive calls of one kind share a command (not on a cluster master: see `write_commands`).
    group: bool,
    timeout: Duration,
    handler: Rc<Handler<C>>,
    /// No more calls: the socket closes once the last reply is in, and is not opened again.
    closing: bool,
}

/// The socket opened on the runtime, for the JS thread to take.
type Opened = Arc<Mutex<Option<Result<Option<DirectStream>, SnatchError>>>>;

/// One per locker: boxing the open socket would cost every call a pointer chase for no memory worth saving.
#[allow(clippy::large_enum_variant)]
enum Phase<C: 'static> {
    /// Not open; opened by the first call after `reopen_at`.
    Closed {
        reopen_at: Option<Instant>,
    },
    Opening(Opened),
    Open(Open<C>),
    /// Direct calls do not apply to this locker (Redlock, a cluster or Sentinel, waitReplicas, a Unix socket URL).
    Unavailable,
}

struct Open<C> {
    stream: DirectStream,
    poll: *mut UvHandle,
    timer: *mut UvHandle,
    /// The calls in flight on this socket, and the bytes on their way.
    session: DirectSession<C>,
    /// Waiting for the socket to take the rest of the session's bytes.
    writable_wanted: bool,
    /// The registration that closes the handles when the JS environment is torn down, and its count of the state.
    cleanup: sys::napi_async_cleanup_hook_handle,
    cleanup_arg: *mut c_void,
}

impl<C: DirectCall + 'static> LoopSocket<C> {
    /// A socket to `target` for calls with `timeout` as deadline, replies going to `handler`. Nothing opens yet.
    pub(crate) fn new(env: sys::napi_env, target: DirectTarget, timeout: Duration, handler: Handler<C>) -> Self {
        let phase = Phase::Closed { reopen_at: None };
        let group = target == DirectTarget::Server;
        let handler = Rc::new(handler);
        let state = State { env, phase, target, group, timeout, handler, closing: false };
        Self { state: Rc::new(RefCell::new(state)) }
    }

    /// Whether calls can be sent now. When not, starts opening the socket for `locker` if it is closed and may be
    /// opened again.
    pub(crate) fn ready(&self, locker: &Locker) -> bool {
        let mut state = self.state.borrow_mut();
        if state.closing {
            return false;
        }
        match &state.phase {
            Phase::Open(_) => return true,
            Phase::Unavailable => return false,
            Phase::Closed { reopen_at } => {
                if reopen_at.is_some_and(|at| Instant::now() < at) || locker.is_closed() {
                    return false;
                }
                let (opened, locker, target) = (Opened::default(), locker.clone(), state.target.clone());
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
                    Ok(Some(stream)) => match install(&self.state, state.env, stream, state.timeout, state.group) {
                        Some(open) => Phase::Open(open),
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
        let timeout = millis(open.session.timeout());
        // SAFETY: on the loop's thread (the JS thread, which owns the state); the timer is open while the socket is
        // (`shut` closes both) and its data is the state's, which `on_deadline` expects.
        if open.session.is_idle() && unsafe { uv_timer_start(open.timer, on_deadline::<C>, timeout, 0) } != 0 {
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

impl<C: 'static> Drop for LoopSocket<C> {
    fn drop(&mut self) {
        self.state.borrow_mut().closing = true;
        shut(&self.state);
    }
}

/// Bytes allocated for a libuv handle (a poll or timer handle is about 160; checked in [`libuv_matches`]).
const HANDLE_BYTES: usize = 512;

fn handle_layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(HANDLE_BYTES, 16).expect("handle layout")
}

/// Whether the running libuv is the one declared above: libuv 1.19 or later (1.x keeps its ABI; 1.19 added
/// `uv_handle_type_name`), whose `UV_POLL` and `UV_TIMER` are named "poll" and "timer" and fit in [`HANDLE_BYTES`].
/// Checked once, before the first socket is installed rather than at load: Bun and Deno abort on some libuv calls,
/// and the facade turns direct calls off there before any is made. A mismatch is written to stderr once.
fn libuv_matches() -> bool {
    static MATCHES: OnceLock<bool> = OnceLock::new();
    *MATCHES.get_or_init(|| {
        let Err(why) = check_libuv() else { return true };
        let _ = writeln!(std::io::stderr(), "redis-snatch: {why}; calls take the locker's own connection");
        false
    })
}

/// See [`libuv_matches`].
fn check_libuv() -> Result<(), String> {
    // SAFETY: reads libuv's version, a constant; any thread.
    let version = unsafe { uv_version() };
    let (major, minor, patch) = (version >> 16, (version >> 8) & 0xff, version & 0xff);
    if major != 1 || minor < 19 {
        return Err(format!("libuv {major}.{minor}.{patch} is not 1.x from 1.19 on"));
    }
    for (kind, expected) in [(UV_POLL, c"poll"), (UV_TIMER, c"timer")] {
        // SAFETY: libuv 1.19 or later (checked above) has the function, which returns a pointer into its static
        // table of NUL-terminated names, or null for an unknown type; any thread.
        let (name, size) = unsafe { (uv_handle_type_name(kind), uv_handle_size(kind)) };
        // SAFETY: not null, so one of libuv's static names, as above.
        let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
        if name != Some(expected) {
            return Err(format!("libuv's handle type {kind} is {name:?}, not {expected:?}"));
        }
        if size > HANDLE_BYTES {
            return Err(format!("libuv's {expected:?} handle takes {size} bytes, more than {HANDLE_BYTES}"));
        }
    }
    Ok(())
}

/// A zeroed block for a libuv handle; `None` when memory ran out.
fn new_handle() -> Option<*mut UvHandle> {
    // SAFETY: the layout's size is not zero.
    let handle = unsafe { std::alloc::alloc_zeroed(handle_layout()) };
    (!handle.is_null()).then(|| handle.cast())
}

/// Frees a block of [`new_handle`].
// SAFETY: callers pass a block of `new_handle` that libuv has no use of (not initialized, or closed).
unsafe fn free_handle(handle: *mut UvHandle) {
    // SAFETY: allocated with this layout, per the contract.
    unsafe { std::alloc::dealloc(handle.cast(), handle_layout()) }
}

/// Closes a handle that `install` initialized and gave up on; its data is not set (no callback of ours ran).
extern "C" fn on_abandoned(handle: *mut UvHandle) {
    // SAFETY: libuv closed the handle, a block of `new_handle` that nothing else refers to.
    unsafe { free_handle(handle) }
}

/// Hands `stream` to the loop of `env`: a poll handle for it, a timer for the deadlines, and the cleanup hook that
/// closes them if the environment is torn down first; its calls have `timeout` each, grouped as `group` says
/// ([`DirectSession::new`]). `None` if libuv or N-API refuses any of it, or libuv is not the one declared above
/// ([`libuv_matches`]); nothing is left registered then.
fn install<C: DirectCall + 'static>(
    state: &Rc<RefCell<State<C>>>,
    env: sys::napi_env,
    stream: DirectStream,
    timeout: Duration,
    group: bool,
) -> Option<Open<C>> {
    if !libuv_matches() {
        return None;
    }
    let mut event_loop = ptr::null_mut();
    // SAFETY: on the JS thread of `env` (`ready` is called from JS); the call writes `event_loop`.
    let status = unsafe { sys::napi_get_uv_event_loop(env, &mut event_loop) };
    if status != sys::Status::napi_ok || event_loop.is_null() {
        return None;
    }
    let poll = new_handle()?;
    let Some(timer) = new_handle() else {
        // SAFETY: allocated just above and not initialized.
        unsafe { free_handle(poll) };
        return None;
    };
    let mut cleanup = ptr::null_mut();
    // The handles are freed by their close callback once initialized; the poll handle is closed before `stream` closes
    // the socket (see `shut`). Each keeps a count of the state in its data field, and the cleanup hook another, until
    // it is closed (`shut`, `on_closed`); on a failure here no data is set yet, nor has a callback of ours run.
    // SAFETY: on the loop's thread (the JS thread of `env`), with handles of at least libuv's size (`libuv_matches`),
    // zeroed, and used as above.
    unsafe {
        if uv_poll_init_socket(event_loop, poll, stream.as_raw_fd()) != 0 {
            free_handle(poll);
            free_handle(timer);
            return None;
        }
        if uv_timer_init(event_loop, timer) != 0 {
            uv_close(poll, on_abandoned);
            free_handle(timer);
            return None;
        }
        let arg: *mut c_void = Rc::into_raw(state.clone()).cast_mut().cast();
        if uv_poll_start(poll, UV_READABLE, on_poll::<C>) != 0
            || sys::napi_add_async_cleanup_hook(env, Some(on_teardown::<C>), arg, &mut cleanup) != sys::Status::napi_ok
        {
            drop(Rc::from_raw(arg as *const RefCell<State<C>>));
            uv_close(poll, on_abandoned);
            uv_close(timer, on_abandoned);
            return None;
        }
        for handle in [poll, timer] {
            (*handle).data = Rc::into_raw(state.clone()).cast_mut().cast();
            uv_unref(handle);
        }
        Some(Open {
            stream,
            poll,
            timer,
            session: DirectSession::new(timeout, group),
            writable_wanted: false,
            cleanup,
            cleanup_arg: arg,
        })
    }
}

/// The state a handle's callback is for (another count of it).
// SAFETY: callers pass a handle that `install` set up for a `State<C>` and is not closed, on the loop's thread.
unsafe fn state_of<C: 'static>(handle: *mut UvHandle) -> Rc<RefCell<State<C>>> {
    // SAFETY: `data` is the first field of every libuv handle (`UvHandle`); until the handle is closed it holds a count
    // of the state that `install` leaked (`Rc::into_raw`), so the state is alive and another count may be made.
    unsafe {
        let state = (*handle).data as *const RefCell<State<C>>;
        Rc::increment_strong_count(state);
        Rc::from_raw(state)
    }
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
        let events = if wanted { UV_READABLE | UV_WRITABLE } else { UV_READABLE };
        // SAFETY: on the loop's thread; the poll handle is open while the socket is (`shut` closes both), its data
        // the state's, which `on_poll` expects.
        let status = unsafe { uv_poll_start(open.poll, events, on_poll::<C>) };
        if status != 0 {
            return Err(std::io::Error::from_raw_os_error(-status));
        }
        open.writable_wanted = wanted;
    }
    Ok(())
}

/// The loop found the socket readable or writable: writes what is left, reads what came, hands out the replies
/// that are complete; fails the socket on an error or end of stream.
extern "C" fn on_poll<C: DirectCall + 'static>(handle: *mut UvHandle, status: c_int, events: c_int) {
    // SAFETY: libuv calls this on the loop's thread for the poll handle `install` set up for a `State<C>`, only while
    // it is open (closing stops it).
    let state = unsafe { state_of::<C>(handle) };
    let mut replies = Vec::new();
    let healthy = {
        let mut guard = state.borrow_mut();
        let Phase::Open(open) = &mut guard.phase else { return };
        // A read can leave TLS with something to send (its own messages): flushed with the rest.
        status >= 0
            && (events & UV_WRITABLE == 0 || flush(open).is_ok())
            && (events & UV_READABLE == 0 || read(open, &mut replies))
            && (!open.stream.wants_write() || flush(open).is_ok())
    };
    if !replies.is_empty() {
        dispatch(&state, replies);
    }
    if !healthy {
        fail(&state, NoReply::Dropped);
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

/// The timer found the oldest call's deadline: fails the socket if it has passed, else waits for it (or fails the
/// socket as on a write error if the timer does not start again: the deadlines would go unwatched).
extern "C" fn on_deadline<C: DirectCall + 'static>(handle: *mut UvHandle) {
    // SAFETY: libuv calls this on the loop's thread for the timer `install` set up for a `State<C>`, only while it is
    // open (closing stops it).
    let state = unsafe { state_of::<C>(handle) };
    let failed = {
        let guard = state.borrow();
        let Phase::Open(open) = &guard.phase else { return };
        match open.session.deadline(Instant::now()) {
            Deadline::Idle => None,
            Deadline::Passed => Some(NoReply::TimedOut),
            Deadline::In(left) => {
                // SAFETY: as above; this is that timer, open, its data the state's.
                let status = unsafe { uv_timer_start(open.timer, on_deadline::<C>, millis(left) + 1, 0) };
                (status != 0).then_some(NoReply::Dropped)
            }
        }
    };
    if let Some(why) = failed {
        fail(&state, why);
    }
}

/// `duration` in whole milliseconds, as libuv's timers take it.
fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Hands `replies` to the handler inside a handle scope, then sends what was called meanwhile, and closes the
/// socket if it is closing and nothing is in flight any more.
fn dispatch<C: DirectCall + 'static>(state: &Rc<RefCell<State<C>>>, replies: Vec<(C, CallReply)>) {
    let (env, handler) = {
        let mut guard = state.borrow_mut();
        if let Phase::Open(open) = &mut guard.phase {
            open.session.set_dispatching(true);
        }
        (guard.env, guard.handler.clone())
    };
    let mut scope = ptr::null_mut();
    // SAFETY: on the JS thread of `env`, in a loop callback; the call writes `scope`.
    if unsafe { sys::napi_open_handle_scope(env, &mut scope) } == sys::Status::napi_ok {
        handler(replies);
        // SAFETY: the scope opened above, the innermost again now that the handler returned. Closing it fails only
        // for one that is not the innermost: nothing to do about the status.
        unsafe { sys::napi_close_handle_scope(env, scope) };
    }
    // Otherwise no JS value can be made here, so nothing can hear of the replies: they are dropped, as in
    // `on_teardown`.
    let mut guard = state.borrow_mut();
    let closing = guard.closing;
    let Phase::Open(open) = &mut guard.phase else { return };
    open.session.set_dispatching(false);
    let (flushed, idle) = (flush(open).is_ok(), open.session.is_idle());
    drop(guard);
    if !flushed {
        fail(state, NoReply::Dropped);
    } else if closing && idle {
        shut(state);
    }
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

/// Closes the socket and its handles if it is open (not to be opened again when closing), returning its session
/// with the calls that were in flight.
fn shut<C: 'static>(state: &Rc<RefCell<State<C>>>) -> Option<DirectSession<C>> {
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
    let closing = Box::into_raw(Box::new(Closing { handles: 2, cleanup: open.cleanup, cleanup_arg: open.cleanup_arg }));
    // SAFETY: on the loop's thread; the handles are open (the socket was), their data the counts of the state that
    // `install` leaked. Each gives up its count and points to `closing` instead, which the second close callback
    // frees; `uv_close` stops them at once, so no poll or deadline callback reads the data after this.
    unsafe {
        for handle in [open.poll, open.timer] {
            drop(Rc::from_raw((*handle).data as *const RefCell<State<C>>));
            (*handle).data = closing.cast();
            uv_close(handle, on_closed::<C>);
        }
    }
    Some(open.session)
}

/// The handles of a socket being closed, and its cleanup hook, removed once both are closed.
struct Closing {
    handles: u8,
    cleanup: sys::napi_async_cleanup_hook_handle,
    cleanup_arg: *mut c_void,
}

/// libuv closed a handle: frees it, and once both are, removes the cleanup hook.
extern "C" fn on_closed<C: 'static>(handle: *mut UvHandle) {
    // SAFETY: on the loop's thread. `shut` set the data (the first field, see `UvHandle`) to its `Closing`, shared by
    // the two handles and freed by the second callback; the handle is closed, a block of `new_handle` that nothing
    // refers to any more. The cleanup arg is the count of the state that `install` leaked for the hook.
    unsafe {
        let closing = (*handle).data.cast::<Closing>();
        free_handle(handle);
        (*closing).handles -= 1;
        if (*closing).handles == 0 {
            let closing = Box::from_raw(closing);
            // The state may go with this count: before the hook's removal lets node tear the environment down.
            drop(Rc::from_raw(closing.cleanup_arg as *const RefCell<State<C>>));
            // Fails only for a handle that is not a hook's: nothing to do about the status.
            sys::napi_remove_async_cleanup_hook(closing.cleanup);
        }
    }
}

/// The JS environment is being torn down: closes the socket, dropping the calls in flight (nothing can hear of
/// them any more). Node waits for the hook's removal, which comes when the handles are closed.
// SAFETY: node calls it on the JS thread with the arg `install` registered: a count of a `State<C>`, given back only
// once the hook is removed (`on_closed`).
unsafe extern "C" fn on_teardown<C: 'static>(_handle: sys::napi_async_cleanup_hook_handle, arg: *mut c_void) {
    // SAFETY: per the above, the state is alive, so another count of it may be made.
    let state = unsafe {
        let state = arg as *const RefCell<State<C>>;
        Rc::increment_strong_count(state);
        Rc::from_raw(state)
    };
    state.borrow_mut().closing = true;
    shut(&state);
}
