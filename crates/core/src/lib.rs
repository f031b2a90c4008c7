//! redis-snatch core: distributed locks on one Redis (standalone, Sentinel-managed or a Redis Cluster) or on a
//! Redlock majority of independent masters, with fencing tokens, lease renewal and owner-checked release, and
//! cluster-safe cron. The I/O half: tokio, the redis crate's connections, `memory://`; what is said to Redis and what
//! the replies mean, without I/O, is snatch-protocol's. No Node.js types: the N-API binding wraps this crate.

#![forbid(unsafe_code)]

mod config;
mod direct;
mod lead;
pub mod limits;
mod lock;
mod redact;
mod redlock;
mod run;
mod schedule;
mod server;

pub use config::{duration_error, LockOptions, LockerConfig, TlsOptions, Topology};
pub use direct::calls::{AcquireSettled, DirectAcquire, DirectRelease, ReleaseSettled};
pub use direct::open::open as open_direct_socket;
pub use direct::routes::{RouteSocket, Routes};
pub use direct::stream::DirectStream;
pub use lead::campaign::{campaign, Campaign, CampaignOptions, DEFAULT_RETRY};
pub use lead::observer::{observe, Observer};
pub use lock::contention::Contended;
pub use lock::lease::{Lease, LeaseState};
pub use lock::locker::{DirectRoute, Holder, Locker};
pub use lock::shared::Turn;
pub use run::call::Call;
pub use run::input::{Input, Post};
pub use run::runner::{Output, Reentering, Runner, Told};
pub use schedule::fleet::{answer as ask_fleet, FleetRequest};
pub use schedule::options::{Cron, ScheduleOptions};
pub use schedule::scheduler::{schedule, Schedule};
pub use schedule::stored::{
    get as get_stored, handle, list as list_stored, remove as remove_stored, summary as stored_summary,
    upsert as upsert_stored, Handler,
};
pub use snatch_protocol::attempt::Concurrency;
pub use snatch_protocol::{self as protocol, ArgKind, SnatchError};
