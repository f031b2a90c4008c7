//! Node's libuv, for the direct connection's sockets: a socket polled, and a timer, on node's own event loop
//! ([`LoopWatch`]), behind a safe API. The libuv functions are looked up in the running process when first needed,
//! not linked: napi's `sys` declares only `uv_loop_s` (opaque) and `uv_run`; `libuv-sys2` builds and links a libuv of
//! its own (`links = "uv"`, or the system's through pkg-config), whose handles node's loop cannot take; a module that
//! links `uv_*` does not load at all in a runtime that does not export them (Deno). Before the first watch is
//! installed, [`libuv`] checks the running libuv (1.19 or later, the handle types found by name and their sizes);
//! when it is not what this expects, no watch is installed (calls take the locker's own connection) and stderr says
//! why, once.

use napi::{sys, Env};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::io::Write;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr;
use std::rc::Rc;
use std::sync::OnceLock;

/// libuv's `uv_handle_t`, only ever behind a pointer: its first field is the public `data` pointer (`UV_HANDLE_FIELDS`
/// in libuv 1.x's `uv.h` starts with `void* data;`, for the user; libuv does not use it).
#[repr(C)]
struct UvHandle {
    data: *mut c_void,
}

/// `UV_READABLE` and `UV_WRITABLE` of `uv_poll_event`, libuv 1.x's stable API (`uv.h`).
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

/// Bytes allocated for a libuv handle (a poll, timer or check handle is at most about 160; checked in [`libuv`]).
const HANDLE_BYTES: usize = 512;

/// The handles of a [`LoopWatch`]: its poll, timer and check.
const HANDLES: usize = 3;

type PollCallback = extern "C" fn(*mut UvHandle, c_int, c_int);
type HandleCallback = extern "C" fn(*mut UvHandle);

/// The signatures of the libuv functions used here, as libuv 1.x's `uv.h` declares them.
type Version = unsafe extern "C" fn() -> c_uint;
type HandleTypeName = unsafe extern "C" fn(c_int) -> *const c_char;
type HandleSize = unsafe extern "C" fn(c_int) -> usize;
type PollInitSocket = unsafe extern "C" fn(*mut sys::uv_loop_s, *mut UvHandle, c_int) -> c_int;
type PollStart = unsafe extern "C" fn(*mut UvHandle, c_int, PollCallback) -> c_int;
type TimerInit = unsafe extern "C" fn(*mut sys::uv_loop_s, *mut UvHandle) -> c_int;
type TimerStart = unsafe extern "C" fn(*mut UvHandle, HandleCallback, u64, u64) -> c_int;
type CheckInit = unsafe extern "C" fn(*mut sys::uv_loop_s, *mut UvHandle) -> c_int;
type CheckStart = unsafe extern "C" fn(*mut UvHandle, HandleCallback) -> c_int;
type CheckStop = unsafe extern "C" fn(*mut UvHandle) -> c_int;
type Unref = unsafe extern "C" fn(*mut UvHandle);
type Close = unsafe extern "C" fn(*mut UvHandle, HandleCallback);

/// The libuv functions used to watch a socket.
struct Libuv {
    poll_init_socket: PollInitSocket,
    poll_start: PollStart,
    timer_init: TimerInit,
    timer_start: TimerStart,
    check_init: CheckInit,
    check_start: CheckStart,
    check_stop: CheckStop,
    unref: Unref,
    close: Close,
}

/// The running libuv, once looked up and checked; `None` when it is not there or not what this expects (said on
/// stderr once).
fn libuv() -> Option<&'static Libuv> {
    static LIBUV: OnceLock<Option<Libuv>> = OnceLock::new();
    LIBUV
        .get_or_init(|| {
            let found = look_up();
            if let Err(why) = &found {
                let _ = writeln!(std::io::stderr(), "redis-snatch: {why}; calls take the locker's own connection");
            }
            found.ok()
        })
        .as_ref()
}

/// Looks the functions up in the running process and checks its libuv: 1.x from 1.19 on (1.x keeps its ABI; 1.19
/// added `uv_handle_type_name`), with handle types named "poll", "timer" and "check" that fit in [`HANDLE_BYTES`].
fn look_up() -> Result<Libuv, String> {
    let process = libloading::os::unix::Library::this();
    macro_rules! function {
        ($name:literal as $ty:ty) => {
            // SAFETY: the symbol, when the process has it, is libuv's function of that name, whose signature (libuv
            // 1.x's uv.h) is the type it is read as; the process (node) keeps it loaded for good.
            *unsafe { process.get::<$ty>($name) }
                .map_err(|_| format!("this runtime has no libuv function {}", $name))?
        };
    }
    let version = function!("uv_version" as Version);
    let type_name = function!("uv_handle_type_name" as HandleTypeName);
    let size = function!("uv_handle_size" as HandleSize);
    // SAFETY: reads libuv's version, a constant; any thread.
    let version = unsafe { version() };
    let (major, minor, patch) = (version >> 16, (version >> 8) & 0xff, version & 0xff);
    if major != 1 || minor < 19 {
        return Err(format!("libuv {major}.{minor}.{patch} is not 1.x from 1.19 on"));
    }
    // The handle types by name: libuv numbers them from 1 and names none past the last.
    let named = |wanted: &CStr| -> Result<(), String> {
        for kind in 1..64 {
            // SAFETY: libuv 1.19 or later (checked above) has the function, which returns a pointer into its static
            // table of NUL-terminated names, or null for a number that is no handle type; any thread.
            let name = unsafe { type_name(kind) };
            if name.is_null() {
                break;
            }
            // SAFETY: not null, so one of libuv's static names, as above.
            if unsafe { CStr::from_ptr(name) } == wanted {
                // SAFETY: `kind` is a handle type; any thread.
                let bytes = unsafe { size(kind) };
                return match bytes <= HANDLE_BYTES {
                    true => Ok(()),
                    false => Err(format!("libuv's {wanted:?} handle takes {bytes} bytes, more than {HANDLE_BYTES}")),
                };
            }
        }
        Err(format!("libuv has no handle type named {wanted:?}"))
    };
    named(c"poll")?;
    named(c"timer")?;
    named(c"check")?;
    Ok(Libuv {
        poll_init_socket: function!("uv_poll_init_socket" as PollInitSocket),
        poll_start: function!("uv_poll_start" as PollStart),
        timer_init: function!("uv_timer_init" as TimerInit),
        timer_start: function!("uv_timer_start" as TimerStart),
        check_init: function!("uv_check_init" as CheckInit),
        check_start: function!("uv_check_start" as CheckStart),
        check_stop: function!("uv_check_stop" as CheckStop),
        unref: function!("uv_unref" as Unref),
        close: function!("uv_close" as Close),
    })
}

/// What a [`LoopWatch`] calls, on the loop's thread.
pub(crate) trait Watcher: 'static {
    /// The socket is readable and/or writable, or polling it failed.
    fn polled(this: &Rc<Self>, failed: bool, readable: bool, writable: bool);
    /// The timer fired.
    fn timer(this: &Rc<Self>);
    /// The loop finished polling, after [`LoopWatch::check`].
    fn checked(this: &Rc<Self>);
    /// The JS environment is being torn down: the watch must be closed (dropped).
    fn torn_down(this: &Rc<Self>);
}

/// A socket polled, a timer, and a check (a call once the loop has handled what its poll found), on node's event loop,
/// for a watcher: unreferenced (they do not keep the loop alive), and closed when dropped. The watcher is kept alive
/// until the handles are closed, and hears of the JS environment's teardown, which waits for that.
pub(crate) struct LoopWatch<W: Watcher> {
    libuv: &'static Libuv,
    poll: *mut UvHandle,
    timer: *mut UvHandle,
    check: *mut UvHandle,
    /// The registration that has the watcher close the watch when the JS environment is torn down, and its count of
    /// the watcher.
    cleanup: sys::napi_async_cleanup_hook_handle,
    cleanup_arg: *mut c_void,
    watcher: PhantomData<Rc<W>>,
}

impl<W: Watcher> LoopWatch<W> {
    /// Watches socket `fd` for readability (see [`LoopWatch::poll`]) on the loop of `env`, for `watcher`, with a
    /// timer. `None` if libuv or N-API refuses any of it, or libuv is not the one this expects; nothing is left
    /// registered then. On the JS thread of `env`.
    pub(crate) fn install(env: &Env, fd: RawFd, watcher: &Rc<W>) -> Option<Self> {
        let libuv = libuv()?;
        let event_loop = env.get_uv_event_loop().ok().filter(|l| !l.is_null())?;
        let mut handles = [ptr::null_mut(); HANDLES];
        for n in 0..HANDLES {
            let Some(handle) = new_handle() else {
                // SAFETY: allocated just above and not initialized.
                handles[..n].iter().for_each(|handle| unsafe { free_handle(*handle) });
                return None;
            };
            handles[n] = handle;
        }
        let [poll, timer, check] = handles;
        let (mut cleanup, arg): (_, *mut c_void) = (ptr::null_mut(), Rc::into_raw(watcher.clone()).cast_mut().cast());
        // The handles are freed by their close callback once initialized. Each keeps a count of the watcher in its
        // data field, and the cleanup hook another, until it is closed (`drop`, `on_closed`); on a failure here no
        // data is set yet, nor has a callback of ours run.
        // SAFETY: on the loop's thread (the JS thread of `env`), with handles of at least libuv's size (`libuv`),
        // zeroed, and used as above.
        unsafe {
            let initialized = [
                (libuv.poll_init_socket)(event_loop, poll, fd) == 0,
                (libuv.timer_init)(event_loop, timer) == 0,
                (libuv.check_init)(event_loop, check) == 0,
            ];
            let started = initialized.iter().all(|ok| *ok)
                && (libuv.poll_start)(poll, UV_READABLE, on_poll::<W>) == 0
                && sys::napi_add_async_cleanup_hook(env.raw(), Some(on_teardown::<W>), arg, &mut cleanup)
                    == sys::Status::napi_ok;
            if !started {
                drop(Rc::from_raw(arg as *const W));
                for (handle, initialized) in handles.into_iter().zip(initialized) {
                    match initialized {
                        true => (libuv.close)(handle, on_abandoned),
                        false => free_handle(handle),
                    }
                }
                return None;
            }
            for handle in handles {
                (*handle).data = Rc::into_raw(watcher.clone()).cast_mut().cast();
                (libuv.unref)(handle);
            }
        }
        Some(Self { libuv, poll, timer, check, cleanup, cleanup_arg: arg, watcher: PhantomData })
    }

    /// Polls the socket for readability, and for writability too when `writable`; false when libuv refuses.
    pub(crate) fn poll(&self, writable: bool) -> bool {
        let events = if writable { UV_READABLE | UV_WRITABLE } else { UV_READABLE };
        // SAFETY: on the loop's thread (a watch is used on the JS thread only); the poll handle is open while the
        // watch is, its data the watcher's, which `on_poll::<W>` expects.
        unsafe { (self.libuv.poll_start)(self.poll, events, on_poll::<W>) == 0 }
    }

    /// Has the timer fire once, in `ms` milliseconds (replacing an earlier start); false when libuv refuses.
    pub(crate) fn start_timer(&self, ms: u64) -> bool {
        // SAFETY: as for `poll`; the timer is open while the watch is, its data the watcher's, which `on_timer::<W>`
        // expects.
        unsafe { (self.libuv.timer_start)(self.timer, on_timer::<W>, ms, 0) == 0 }
    }

    /// Has the watcher's `checked` called once the loop has handled what its poll found (at once if it is past
    /// that); false when libuv refuses.
    pub(crate) fn check(&self) -> bool {
        // SAFETY: as for `poll`; the check is open while the watch is, its data the watcher's, which `on_check::<W>`
        // expects. Starting a started check does nothing.
        unsafe { (self.libuv.check_start)(self.check, on_check::<W>) == 0 }
    }
}

impl<W: Watcher> Drop for LoopWatch<W> {
    /// Closes the handles; the last close callback frees what they shared and removes the cleanup hook.
    fn drop(&mut self) {
        let closing = Box::into_raw(Box::new(Closing {
            handles: HANDLES as u8,
            cleanup: self.cleanup,
            cleanup_arg: self.cleanup_arg,
            release: release::<W>,
        }));
        // SAFETY: on the loop's thread; the handles are open (the watch is), their data the counts of the watcher that
        // `install` leaked. Each gives up its count and points to `closing` instead, which the last close callback
        // frees; closing stops them at once, so no callback of theirs reads the data after this.
        unsafe {
            for handle in [self.poll, self.timer, self.check] {
                drop(Rc::from_raw((*handle).data as *const W));
                (*handle).data = closing.cast();
                (self.libuv.close)(handle, on_closed);
            }
        }
    }
}

/// The handles of a watch being closed, and its cleanup hook, removed once all are closed.
struct Closing {
    handles: u8,
    cleanup: sys::napi_async_cleanup_hook_handle,
    cleanup_arg: *mut c_void,
    /// Gives up the cleanup hook's count of the watcher.
    release: unsafe fn(*mut c_void),
}

/// Gives up a count of a `W` that `install` leaked.
// SAFETY: callers pass such a count, once.
unsafe fn release<W>(count: *mut c_void) {
    // SAFETY: per the contract.
    drop(unsafe { Rc::from_raw(count as *const W) });
}

/// A zeroed block for a libuv handle; `None` when memory ran out.
fn new_handle() -> Option<*mut UvHandle> {
    // SAFETY: the layout's size is not zero.
    let handle = unsafe { std::alloc::alloc_zeroed(handle_layout()) };
    (!handle.is_null()).then(|| handle.cast())
}

fn handle_layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(HANDLE_BYTES, 16).expect("handle layout")
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

/// The watcher a handle's callback is for (another count of it).
// SAFETY: callers pass a handle that `install` set up for a `W` and is not closed, on the loop's thread.
unsafe fn watcher_of<W>(handle: *mut UvHandle) -> Rc<W> {
    // SAFETY: until the handle is closed its data holds a count of the watcher that `install` leaked
    // (`Rc::into_raw`), so the watcher is alive and another count may be made.
    unsafe {
        let watcher = (*handle).data as *const W;
        Rc::increment_strong_count(watcher);
        Rc::from_raw(watcher)
    }
}

extern "C" fn on_poll<W: Watcher>(handle: *mut UvHandle, status: c_int, events: c_int) {
    // SAFETY: libuv calls this on the loop's thread for the poll handle `install` set up for a `W`, only while it is
    // open (closing stops it).
    let watcher = unsafe { watcher_of::<W>(handle) };
    W::polled(&watcher, status < 0, events & UV_READABLE != 0, events & UV_WRITABLE != 0);
}

extern "C" fn on_timer<W: Watcher>(handle: *mut UvHandle) {
    // SAFETY: as for `on_poll`, for the timer.
    let watcher = unsafe { watcher_of::<W>(handle) };
    W::timer(&watcher);
}

/// Stops the check (it runs once per [`LoopWatch::check`]) and tells the watcher.
extern "C" fn on_check<W: Watcher>(handle: *mut UvHandle) {
    // SAFETY: as for `on_poll`, for the check; stopping a check in its own callback is allowed.
    let watcher = unsafe {
        if let Some(libuv) = libuv() {
            (libuv.check_stop)(handle);
        }
        watcher_of::<W>(handle)
    };
    W::checked(&watcher);
}

/// libuv closed a handle: frees it, and once all are, gives up the hook's count and removes the cleanup hook.
extern "C" fn on_closed(handle: *mut UvHandle) {
    // SAFETY: on the loop's thread. `drop` set the data (the first field, see `UvHandle`) to its `Closing`, shared by
    // the handles and freed by the last callback; the handle is closed, a block of `new_handle` that nothing
    // refers to any more. The cleanup arg is the count of the watcher that `install` leaked for the hook.
    unsafe {
        let closing = (*handle).data.cast::<Closing>();
        free_handle(handle);
        (*closing).handles -= 1;
        if (*closing).handles == 0 {
            let closing = Box::from_raw(closing);
            // The watcher may go with this count: before the hook's removal lets node tear the environment down.
            (closing.release)(closing.cleanup_arg);
            // Fails only for a handle that is not a hook's: nothing to do about the status.
            sys::napi_remove_async_cleanup_hook(closing.cleanup);
        }
    }
}

/// The JS environment is being torn down: the watcher closes its watch. Node waits for the hook's removal, which comes
/// when the handles are closed.
// SAFETY: node calls it on the JS thread with the arg `install` registered: a count of a `W`, given back only once the
// hook is removed (`on_closed`).
unsafe extern "C" fn on_teardown<W: Watcher>(_handle: sys::napi_async_cleanup_hook_handle, arg: *mut c_void) {
    // SAFETY: per the above, the watcher is alive, so another count of it may be made.
    let watcher = unsafe {
        let watcher = arg as *const W;
        Rc::increment_strong_count(watcher);
        Rc::from_raw(watcher)
    };
    W::torn_down(&watcher);
}
