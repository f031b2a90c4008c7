//! N-API binding of the redis-snatch core: converts options, feeds a locker's runner (snatch-core's run/) the
//! facade's calls, its direct sockets' replies and the runtime's results, delivers the runner's outcomes to the
//! facade, and maps core errors to coded JS errors. The JS facade (`index.js`) wraps these classes. Every `unsafe`
//! is in `ffi/` (libuv and raw N-API calls): the rest of the binding may not have any.

#![deny(unsafe_code)]

mod delivery;
mod direct_sockets;
mod errors;
#[allow(unsafe_code)]
mod ffi;
mod functions;
mod host;
mod inbox;
mod lead;
mod limits;
mod locker;
#[cfg_attr(any(not(unix), feature = "unsupported-loop-socket"), path = "loop_socket_unsupported.rs")]
mod loop_socket;
mod options;
mod schedule;

/// mimalloc instead of the system allocator: buffers and tasks are allocated on one thread and freed on another,
/// which glibc's malloc pays for with arena locks (measured: about a fifth less node CPU per snatchTask at c=50).
/// Built to commit memory on demand (.cargo/config.toml), so that what it frees goes back to the OS.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One Tokio worker thread: the work here is I/O and small scripts, and fewer threads mean cheaper wake-ups
/// between the JS thread and the runtime (measured: see bench/README.md, "Profile").
#[napi_derive::module_init]
fn init() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("cannot build the Tokio runtime");
    napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
}
