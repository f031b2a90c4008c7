//! The lock on one deployment or a Redlock majority: the locker (acquire, wait, run under a lock, close), a held
//! lease, its renewal and loss, a fair waiter's place in a queue, the keys waited for most, shared results, and the jobs (schedules) `close` stops.

pub(crate) mod contention;
pub(crate) mod job;
pub(crate) mod lease;
pub(crate) mod locker;
pub(crate) mod place;
pub(crate) mod shared;
pub(crate) mod stall;
pub(crate) mod supervisor;
