//! Redlock: the nodes a locker writes to and the majority rule over their answers (one node is a majority of one).

pub(crate) mod quorum;
