//! The direct connection's protocol, without its I/O: the commands of direct calls written (grouped on a single
//! server; a transaction or the acquire script, by whether the lock's fence counter was counted up lately), the replies a socket awaits paired with its calls, deadlines and failure (the session), the handshake,
//! and what a socket connects to (one server, or a cluster master by slot).

pub mod answer;
pub mod awaited;
pub mod clock;
pub mod commands;
pub mod handshake;
pub mod recent;
pub mod session;
pub mod target;
