//! The lock on one deployment or a Redlock majority: the locker (acquire, wait, run under a lock, close), a held
//! lease, its renewal and loss, and the background releases and jobs
//! (schedules) `close` waits for.

pub(crate) mod cleanup;
pub(crate) mod job;
pub(crate) mod lease;
pub(crate) mod locker;
pub(crate) mod supervisor;
