//! redis-snatch core: distributed locks on one Redis (standalone, Sentinel-managed or a Redis Cluster) or on a
//! Redlock majority of independent masters, with fencing tokens, lease renewal and owner-checked release. No Node.js
//! types: the N-API binding wraps this crate.

#![forbid(unsafe_code)]

mod awaited;
mod batcher;
mod cleanup;
mod config;
mod connection;
mod cron;
mod direct;
mod direct_stream;
mod endpoint;
mod error;
mod keys;
mod lease;
mod locker;
mod node;
mod quorum;
mod resp;
mod scheduler;
mod scripts;
mod sentinel;
mod supervisor;
mod waker;

pub use awaited::AwaitedReplies;
pub use chrono;
pub use config::{validate_ttl, LockOptions, LockerConfig, TlsOptions, Topology, MAX_DURATION_MS};
pub use cron::CronSchedule;
pub use direct::{
    write_commands, ClusterMap, DirectAcquire, DirectCall, DirectCommand, DirectRelease, DirectTarget, NoReply,
    Settled, DIRECT_CLIENT_NAME,
};
pub use direct_stream::DirectStream;
pub use error::{ArgKind, SnatchError};
pub use keys::{slot, validate_key, LockKeys, CLOCK_FLOOR, MAX_KEY_BYTES};
pub use lease::{Lease, LeaseState};
pub use locker::{not_acquired, run_under, Busy, Locker, Ran};
pub use resp::{parse as parse_reply, ProtocolError, Reply};
pub use scheduler::{Schedule, ScheduleOptions, SkipReason, TickEvent, TickHandler};
