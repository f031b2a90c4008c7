//! Reaching one Redis deployment (a server, a Sentinel master or a Redis Cluster): URLs, credentials and TLS, the
//! command connection, batched script calls, and the release notifications that wake waiters; or `memory://`, an
//! in-process stand-in for users' tests.

pub(crate) mod batcher;
mod certificate_check;
pub(crate) mod connection;
pub(crate) mod dial;
pub(crate) mod endpoint;
pub(crate) mod failure;
pub(crate) mod keyspace;
pub(crate) mod memory;
pub(crate) mod node;
pub(crate) mod offered;
pub(crate) mod script_call;
pub(crate) mod sentinel;
mod tls;
pub(crate) mod waiters;
pub(crate) mod waker;
