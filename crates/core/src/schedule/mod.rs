//! Cluster-safe cron: cron expressions in a time zone, schedules whose every occurrence runs once across the replicas,
//! what they keep in Redis, and the fleet-wide view and control of them.

pub(crate) mod attempt;
pub(crate) mod cron;
pub(crate) mod dispatch;
pub(crate) mod fleet;
pub(crate) mod options;
pub(crate) mod scheduler;
pub(crate) mod store;
pub mod stored;
