//! The direct connection's protocol, without its I/O: the commands of direct calls written (releases grouped on a
//! single server; an acquisition's commands, or the acquire script for a lock whose commands found a new fence
//! counter), the replies a socket awaits paired with its calls, deadlines and failure (the session), the handshake,
//! and what a socket connects to (one server, or a cluster master by slot).

pub mod answer;
pub mod awaited;
pub mod commands;
pub mod handshake;
pub mod kept;
pub mod session;
pub mod target;
