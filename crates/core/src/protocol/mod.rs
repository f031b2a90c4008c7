//! What is said to Redis: how a lock is taken (defined once, for the acquire script and the direct connection's
//! transaction), the Lua scripts (each written once) and the few pieces of RESP the direct connection writes and
//! reads.

pub(crate) mod acquisition;
pub(crate) mod resp;
pub(crate) mod scripts;
