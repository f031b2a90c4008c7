//! What is said to Redis: the Lua scripts (each written once) and the few pieces of RESP the direct connection
//! writes and reads.

pub(crate) mod resp;
pub(crate) mod scripts;
