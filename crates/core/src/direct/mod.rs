//! The direct connection: acquisitions and releases whose commands the caller carries on a socket of its own (the
//! Node binding: a socket node's event loop polls). The calls and their outcomes, the replies a socket awaits, the
//! protocol of a socket without its I/O (which calls go together, replies paired with calls, deadlines, failure),
//! and the byte stream (plain or TLS) the caller drives.

pub(crate) mod awaited;
pub(crate) mod calls;
pub(crate) mod session;
pub(crate) mod stream;
