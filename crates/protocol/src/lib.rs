//! What redis-snatch says to Redis, without I/O: RESP, how a lock is taken (the commands and the Lua scripts, each
//! written once) and what each reply means, the Redis names of a lock, the errors, and the direct connection's
//! protocol (grouping, reply pairing, deadlines). snatch-core does the I/O (tokio, the redis crate); the fuzz targets
//! and property tests use this crate as it is.

#![forbid(unsafe_code)]

pub mod acquisition;
pub mod attempt;
pub mod direct;
pub mod error;
pub mod fleet;
pub mod keys;
pub mod lead;
pub mod offers;
pub mod owner;
pub mod resp;
pub mod run;
pub mod schedule;
pub mod schedule_loop;
pub mod scripts;
pub mod shared;
pub mod stored;

pub use error::{ArgKind, SnatchError};
