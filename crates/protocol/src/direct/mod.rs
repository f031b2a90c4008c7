//! The direct connection's protocol, without its I/O: the commands of direct calls written (grouped on a single
//! server; a transaction, or the acquire script for a lock whose transaction found a new fence counter), the replies a
//! socket awaits paired with its calls, deadlines and failure (the session), the handshake, and what a socket connects
//! to (one server, or a cluster master by slot).

pub mod answer;
pub mod awaited;
pub mod commands;
pub mod handshake;
pub mod session;
pub mod target;
