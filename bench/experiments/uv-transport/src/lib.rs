//! Experiment: redis-snatch's acquire and release scripts over a Redis socket that node's own libuv loop polls
//! (`uv_poll`), the replies resolving promises on the JS thread: no Tokio worker, no hops between threads. Unix only.
//! Single connection per process, blocking connect, no timeouts or reconnection: it measures the transport, it is
//! not one. `supervision` stands in for the supervision of the leases acquired (what would renew them at a third of
//! their ttl), to measure its cost: `"task"`, a Tokio task per lease (on one worker thread, as in redis-snatch),
//! cancelled by the release; `"table"`, one table of renewal times that a single Tokio task sleeps on, entered and
//! left under a mutex without waking it; anything else, none.

use napi::bindgen_prelude::Unknown;
use napi::{sys, Env, Error, Result};
use napi_derive::napi;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::c_void;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

/// mimalloc, as in redis-snatch: tasks are allocated on the JS thread and freed on the worker.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The runtime of the lease supervisors: one worker thread, like redis-snatch's.
static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    let builder = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build();
    builder.expect("Tokio runtime")
});

extern "C" {
    fn uv_handle_size(kind: i32) -> usize;
    fn uv_poll_init_socket(event_loop: *mut sys::uv_loop_s, handle: *mut c_void, socket: i32) -> i32;
    fn uv_poll_start(handle: *mut c_void, events: i32, callback: extern "C" fn(*mut c_void, i32, i32)) -> i32;
}

/// `UV_POLL` of libuv's `uv_handle_type` and `UV_READABLE` of `uv_poll_event` (stable across libuv 1.x).
const UV_POLL: i32 = 8;
const UV_READABLE: i32 = 1;

/// The connection and what is in flight on it.
struct Connection {
    env: sys::napi_env,
    stream: TcpStream,
    /// The calls sent, in the order of their replies.
    pending: VecDeque<Pending>,
    supervision: Supervision,
    read: Vec<u8>,
    /// Calls made while replies are being handed out go out together when that ends.
    write: Vec<u8>,
    dispatching: bool,
    async_context: sys::napi_async_context,
    resource: sys::napi_ref,
    acquire_sha: String,
    release_sha: String,
}

/// A call awaiting its reply: its promise, and for an acquisition its token and ttl.
struct Pending {
    deferred: sys::napi_deferred,
    acquired: Option<(String, u32)>,
}

thread_local! { static CONNECTION: RefCell<Option<Connection>> = const { RefCell::new(None) }; }

/// Appends `args` as one RESP command.
fn encode(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        buf.extend_from_slice(arg);
        buf.extend_from_slice(b"\r\n");
    }
}

/// One reply at the start of `buf` and its length; `None` while incomplete. Integers are `Ok`, anything else
/// (errors, and the bulk strings of `SCRIPT LOAD`) is `Err` with its text.
fn parse(buf: &[u8]) -> Option<(std::result::Result<i64, String>, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = String::from_utf8_lossy(&buf[1..end]).into_owned();
    match buf[0] {
        b':' => Some((line.parse().map_err(|_| line.clone()), end + 2)),
        b'$' if line == "-1" => Some((Err("nil".into()), end + 2)),
        b'$' => {
            let len: usize = line.parse().ok()?;
            let total = end + 2 + len + 2;
            (buf.len() >= total).then(|| (Err(String::from_utf8_lossy(&buf[end + 2..total - 2]).into()), total))
        }
        _ => Some((Err(line), end + 2)),
    }
}

/// Sends one command and waits for its reply (set-up only, before the socket is handed to the loop).
fn call_blocking(stream: &mut TcpStream, args: &[&[u8]]) -> std::io::Result<String> {
    let mut command = Vec::new();
    encode(&mut command, args);
    stream.write_all(&command)?;
    let (mut reply, mut chunk) = (Vec::new(), [0u8; 4096]);
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&chunk[..n]);
        if let Some((value, _)) = parse(&reply) {
            return Ok(value.map_or_else(|text| text, |n| n.to_string()));
        }
    }
}

/// Writes what is buffered; the experiment treats a short write as fatal.
fn flush(connection: &mut Connection) {
    let written = connection.stream.write(&connection.write).expect("write to Redis");
    assert_eq!(written, connection.write.len(), "short write");
    connection.write.clear();
}

/// The loop found the socket readable: read everything, settle the calls whose replies are complete inside one
/// callback scope (so that promise reactions run when it closes), then send what those reactions called.
extern "C" fn on_readable(_handle: *mut c_void, status: i32, _events: i32) {
    assert_eq!(status, 0, "poll error");
    let (env, replies, resource, async_context) = CONNECTION.with(|slot| {
        let mut slot = slot.borrow_mut();
        let c = slot.as_mut().expect("connected");
        let mut chunk = [0u8; 65536];
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) => panic!("Redis closed the connection"),
                Ok(n) => c.read.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("read from Redis: {e}"),
            }
        }
        let (mut replies, mut at) = (Vec::new(), 0);
        while let Some((value, len)) = parse(&c.read[at..]) {
            at += len;
            let call = c.pending.pop_front().expect("a reply per call");
            if let (Some((token, ttl)), Ok(0..)) = (call.acquired, &value) {
                c.supervision.start(token, ttl);
            }
            replies.push((call.deferred, value));
        }
        c.read.drain(..at);
        c.dispatching = !replies.is_empty();
        (c.env, replies, c.resource, c.async_context)
    });
    if replies.is_empty() {
        return;
    }
    // SAFETY: on the JS thread, inside a handle scope, with the env and references made by `connect`.
    unsafe {
        let (mut handles, mut resource_object, mut scope) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        sys::napi_open_handle_scope(env, &mut handles);
        sys::napi_get_reference_value(env, resource, &mut resource_object);
        sys::napi_open_callback_scope(env, resource_object, async_context, &mut scope);
        for (deferred, value) in replies {
            let mut result = ptr::null_mut();
            match value {
                Ok(n) => {
                    sys::napi_create_int64(env, n, &mut result);
                    sys::napi_resolve_deferred(env, deferred, result);
                }
                Err(text) => {
                    let mut message = ptr::null_mut();
                    sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut message);
                    sys::napi_create_error(env, ptr::null_mut(), message, &mut result);
                    sys::napi_reject_deferred(env, deferred, result);
                }
            }
        }
        sys::napi_close_callback_scope(env, scope);
        sys::napi_close_handle_scope(env, handles);
    }
    CONNECTION.with(|slot| {
        let mut slot = slot.borrow_mut();
        let c = slot.as_mut().expect("connected");
        c.dispatching = false;
        if !c.write.is_empty() {
            flush(c);
        }
    });
}

/// How the leases acquired are watched (see the module's comment).
enum Supervision {
    None,
    /// A task per lease, by token; dropping its sender cancels it.
    Tasks(HashMap<String, oneshot::Sender<()>>),
    Table,
}

/// The renewal times of the leases held (`"table"`), and each token's entry.
#[derive(Default)]
struct Table {
    due: BTreeSet<(Instant, String)>,
    by_token: HashMap<String, Instant>,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

/// How long the table's task sleeps at most: a lease due sooner than that would have to wake it.
const TABLE_TICK: Duration = Duration::from_secs(1);

impl Supervision {
    fn new(kind: &str) -> Self {
        match kind {
            "task" => Self::Tasks(HashMap::new()),
            "table" => {
                RUNTIME.spawn(async {
                    loop {
                        let wake = {
                            let mut table = TABLE.lock().expect("table");
                            let now = Instant::now();
                            // Would renew what is due; here it is only rescheduled a tick later.
                            while let Some((at, token)) = table.due.first().cloned().filter(|(at, _)| *at <= now) {
                                table.due.remove(&(at, token.clone()));
                                table.due.insert((now + TABLE_TICK, token.clone()));
                                table.by_token.insert(token, now + TABLE_TICK);
                            }
                            table.due.first().map_or(now + TABLE_TICK, |(at, _)| (*at).min(now + TABLE_TICK))
                        };
                        tokio::time::sleep_until(wake.into()).await;
                    }
                });
                Self::Table
            }
            _ => Self::None,
        }
    }

    /// Watches the lease of `token` (`ttl` ms) until [`Supervision::stop`].
    fn start(&mut self, token: String, ttl: u32) {
        let renew_at = Duration::from_millis(u64::from(ttl / 3));
        match self {
            Self::None => {}
            Self::Tasks(tasks) => {
                let (cancel, cancelled) = oneshot::channel::<()>();
                RUNTIME.spawn(async move {
                    tokio::select! {
                        _ = cancelled => {}
                        () = tokio::time::sleep(renew_at) => {}
                    }
                });
                tasks.insert(token, cancel);
            }
            Self::Table => {
                let at = Instant::now() + renew_at;
                let mut table = TABLE.lock().expect("table");
                table.due.insert((at, token.clone()));
                table.by_token.insert(token, at);
            }
        }
    }

    /// The lease of `token` is released.
    fn stop(&mut self, token: &str) {
        match self {
            Self::None => {}
            Self::Tasks(tasks) => drop(tasks.remove(token)),
            Self::Table => {
                let mut table = TABLE.lock().expect("table");
                if let Some(at) = table.by_token.remove(token) {
                    table.due.remove(&(at, token.to_owned()));
                }
            }
        }
    }
}

/// Connects to Redis at `host`:`port` (blocking, no AUTH or SELECT), loads the two scripts and hands the socket to
/// the loop.
#[napi]
pub fn connect(
    env: Env,
    host: String,
    port: u32,
    acquire_script: String,
    release_script: String,
    supervision: String,
) -> Result<()> {
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    let mut stream = TcpStream::connect((host.as_str(), port as u16)).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    let acquire_sha = call_blocking(&mut stream, &[b"SCRIPT", b"LOAD", acquire_script.as_bytes()]).map_err(io)?;
    let release_sha = call_blocking(&mut stream, &[b"SCRIPT", b"LOAD", release_script.as_bytes()]).map_err(io)?;
    stream.set_nonblocking(true).map_err(io)?;
    let raw = env.raw();
    // SAFETY: node's loop of this env; the poll handle is allocated at libuv's size for it and never freed (one
    // per process).
    unsafe {
        let mut event_loop = ptr::null_mut();
        sys::napi_get_uv_event_loop(raw, &mut event_loop);
        let handle = Box::leak(vec![0u8; uv_handle_size(UV_POLL)].into_boxed_slice()).as_mut_ptr().cast();
        if uv_poll_init_socket(event_loop, handle, stream.as_raw_fd()) != 0
            || uv_poll_start(handle, UV_READABLE, on_readable) != 0
        {
            return Err(Error::from_reason("uv_poll failed"));
        }
        let (mut resource_object, mut name, mut async_context, mut resource) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        sys::napi_create_object(raw, &mut resource_object);
        sys::napi_create_string_utf8(raw, c"uv-transport".as_ptr(), 12, &mut name);
        sys::napi_async_init(raw, resource_object, name, &mut async_context);
        sys::napi_create_reference(raw, resource_object, 1, &mut resource);
        let connection = Connection {
            env: raw,
            stream,
            pending: VecDeque::new(),
            supervision: Supervision::new(&supervision),
            read: Vec::new(),
            write: Vec::new(),
            dispatching: false,
            async_context,
            resource,
            acquire_sha,
            release_sha,
        };
        CONNECTION.with(|slot| *slot.borrow_mut() = Some(connection));
    }
    Ok(())
}

/// Sends the command `args` builds and returns the promise of its reply.
fn send<'e>(
    env: &'e Env,
    acquired: Option<(String, u32)>,
    args: impl FnOnce(&mut Connection, &mut Vec<u8>),
) -> Unknown<'e> {
    CONNECTION.with(|slot| {
        let mut slot = slot.borrow_mut();
        let c = slot.as_mut().expect("connect first");
        let mut write = std::mem::take(&mut c.write);
        args(c, &mut write);
        c.write = write;
        if !c.dispatching {
            flush(c);
        }
        // SAFETY: on the JS thread, with this call's env.
        unsafe {
            let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
            sys::napi_create_promise(env.raw(), &mut deferred, &mut promise);
            c.pending.push_back(Pending { deferred, acquired });
            Unknown::from_raw_unchecked(env.raw(), promise)
        }
    })
}

/// The acquire script on `key` (fence counter `{key}:fence`): the fence, or a negative number when taken.
#[napi(ts_return_type = "Promise<number>")]
pub fn acquire<'e>(env: &'e Env, key: String, token: String, ttl: u32) -> Unknown<'e> {
    let (fence, ttl_ms, ttl) = (format!("{{{key}}}:fence"), ttl, ttl.to_string());
    send(env, Some((token.clone(), ttl_ms)), |c, buf| {
        let sha = c.acquire_sha.as_bytes();
        encode(buf, &[b"EVALSHA", sha, b"2", key.as_bytes(), fence.as_bytes(), token.as_bytes(), ttl.as_bytes()])
    })
}

/// The release script on `key`: 1 when released.
#[napi(ts_return_type = "Promise<number>")]
pub fn release<'e>(env: &'e Env, key: String, token: String) -> Unknown<'e> {
    send(env, None, |c, buf| {
        c.supervision.stop(&token);
        let sha = c.release_sha.as_bytes();
        encode(buf, &[b"EVALSHA", sha, b"1", key.as_bytes(), token.as_bytes()])
    })
}
