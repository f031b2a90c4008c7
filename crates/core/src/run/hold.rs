//! A lock the runner holds: for a run of the caller's or a lock it handed out, or for a schedule's occurrence.

use crate::lock::lease::Lease;
use crate::lock::locker::Busy;
use snatch_protocol::run::Held;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// A lock the runner holds.
pub enum Hold {
    /// A lease; `busy` counts a run on the locker (`close` waits for it) while it lasts; none for a lock the caller
    /// holds (`close` releases it).
    Lease { lease: Arc<Lease>, busy: Option<Busy> },
    /// A schedule's occurrence: its run lock (whose fence the fn gets), and its claim, kept `period` more once given
    /// back, so that a replica whose clock lags does not run it again; `ended` is told once both are given back.
    Occurrence { run: Arc<Lease>, claim: Arc<Lease>, period: Duration, ended: oneshot::Sender<()>, busy: Busy },
}

impl Hold {
    /// The lease whose fence and token the caller sees.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        match self {
            Self::Lease { lease, .. } => lease,
            Self::Occurrence { run, .. } => run,
        }
    }
}

impl Held for Hold {
    fn fence(&self) -> i64 {
        self.lease().fence()
    }

    fn token(&self) -> &str {
        self.lease().token()
    }

    /// An occurrence's lapses with either lease: with its claim lost, another replica may run it too.
    fn lapsed(&self) -> bool {
        match self {
            Self::Lease { lease, .. } => lease.lapsed(),
            Self::Occurrence { run, claim, .. } => run.lapsed() || claim.lapsed(),
        }
    }
}
