//! The direct connection: acquisitions and releases whose commands the caller carries on a socket of its own (the
//! Node binding: a socket node's event loop polls). The calls and their outcomes, the replies a socket awaits, and
//! the byte stream (plain or TLS) the caller drives.

pub(crate) mod awaited;
pub(crate) mod calls;
pub(crate) mod stream;
