//! redis-snatch core: distributed locks on one Redis (standalone, Sentinel-managed or a Redis Cluster) or on a
//! Redlock majority of independent masters, with fencing tokens, lease renewal and owner-checked release. No Node.js
//! types: the N-API binding wraps this crate.

#![forbid(unsafe_code)]

mod config;
mod direct;
mod error;
mod lock;
mod protocol;
mod redlock;
mod schedule;
mod server;

pub use chrono;
pub use config::{validate_ttl, LockOptions, LockerConfig, TlsOptions, Topology, MAX_DURATION_MS};
pub use direct::awaited::AwaitedReplies;
pub use direct::calls::{
    write_commands, ClusterMap, DirectAcquire, DirectCall, DirectCommand, DirectRelease, DirectTarget, NoReply,
    Settled, DIRECT_CLIENT_NAME,
};
pub use direct::session::{Deadline, DirectSession, Outcome};
pub use direct::stream::DirectStream;
pub use error::{ArgKind, SnatchError};
pub use lock::keys::{slot, validate_key, LockKeys, CLOCK_FLOOR, MAX_KEY_BYTES};
pub use lock::lease::{Lease, LeaseState};
pub use lock::locker::{not_acquired, run_under, Busy, Inspection, Locker, Ran};
pub use protocol::resp::{parse as parse_reply, ProtocolError, Reply};
pub use schedule::cron::CronSchedule;
pub use schedule::scheduler::{Schedule, ScheduleOptions, SkipReason, TickEvent, TickHandler};

/// The acquire script's source as Redis runs it, for tests that call it with a token of their own.
#[doc(hidden)]
pub fn acquire_script() -> &'static str {
    protocol::scripts::ACQUIRE.source()
}
