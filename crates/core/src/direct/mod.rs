//! The direct connection's I/O: sockets opened (TCP, TLS, the handshake), the byte stream a caller drives without
//! blocking, which of the caller's sockets a call takes, and the calls (acquisitions and releases) whose replies
//! become leases. Its protocol without I/O (grouping, reply pairing, deadlines) is snatch-protocol's direct/.

pub(crate) mod calls;
pub(crate) mod open;
pub(crate) mod routes;
pub(crate) mod stream;
