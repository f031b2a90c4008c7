//! The runner's direct calls (an acquisition, or a release), as a socket keeps them until their reply. The caller
//! keeps the sockets (the binding: sockets node's event loop polls) and sends each call on the one of its slot.

use crate::direct::calls::{DirectAcquire, DirectRelease};
use crate::lock::locker::Busy;
use snatch_protocol::direct::commands::{DirectCall, DirectCommand};
use snatch_protocol::offers::Offers;
use snatch_protocol::run::Purpose;

/// A direct call of the runner, until its reply. One per call in flight, moved a few times: boxing the larger
/// variant would cost an allocation per call instead.
#[allow(clippy::large_enum_variant)]
pub enum Call {
    /// The acquisition of run or lock `id`; with `required`, a run fails when it does not get the lock (withLock).
    Acquire { id: u32, purpose: Purpose, required: bool, attempt: DirectAcquire, busy: Busy },
    /// The release of run `id`'s lock (its fn settled), or of lock `id` the caller gives back; `busy` counts it on
    /// the locker until it is done.
    Release { id: u32, purpose: Purpose, release: DirectRelease, busy: Option<Busy> },
}

impl Call {
    /// The cluster slot of the call's lock (which master of a cluster it goes to).
    pub fn slot(&self) -> u16 {
        match self {
            Self::Acquire { attempt, .. } => attempt.slot(),
            Self::Release { release, .. } => release.slot(),
        }
    }
}

impl DirectCall for Call {
    fn command(&self) -> DirectCommand<'_> {
        match self {
            Self::Acquire { attempt, .. } => attempt.command(),
            Self::Release { release, .. } => release.command(),
        }
    }

    fn encoded(&mut self, at: std::time::Instant, offers: Offers) {
        match self {
            Self::Acquire { attempt, .. } => attempt.encoded(at),
            Self::Release { release, .. } => release.encoded(offers),
        }
    }
}
