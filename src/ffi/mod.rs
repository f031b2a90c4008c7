//! Every `unsafe` of the binding, behind safe typed APIs: the N-API calls napi-rs has no safe form of (napi.rs:
//! calls of JS functions in a callback scope, plain functions with positional arguments, throwing a coded error) and
//! node's libuv, for the direct connection's sockets (uv.rs: a socket polled and a timer on node's event loop, its
//! functions looked up at run time). The other files of the binding have none.

pub(crate) mod napi;
#[cfg(all(unix, not(feature = "unsupported-loop-socket")))]
pub(crate) mod uv;
