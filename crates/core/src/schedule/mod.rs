//! Cluster-safe cron: cron expressions in a time zone, and schedules whose every occurrence runs on one replica.

pub(crate) mod cron;
pub(crate) mod scheduler;
