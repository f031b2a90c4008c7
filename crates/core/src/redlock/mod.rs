//! Redlock: the nodes a locker writes to and the majority rule over their answers (one node is a majority of one),
//! and the owner-checked releases made on them in the background that `close` waits for.

pub(crate) mod cleanup;
pub(crate) mod quorum;
