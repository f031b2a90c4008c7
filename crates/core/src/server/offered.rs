//! What a server offers of its own commands (snatch-protocol's offers.rs), as one connection learns it: from the
//! first use of each command (a compare-and-delete asked first on a key of its own: see `Node::release`). A connection
//! opened again may reach another server (a failover), so what it learned is forgotten then.

use snatch_protocol::offers::CompareAndDelete;
use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const OFFERED: u8 = 1;
const REFUSED: u8 = 2;

/// Whether the server offers one command, as far as the connection has learned.
#[derive(Debug, Default)]
pub(crate) struct Offered(AtomicU8);

impl Offered {
    /// Whether the command is worth trying: offered, or not known yet.
    pub(crate) fn worth_trying(&self) -> bool {
        self.0.load(Ordering::Relaxed) != REFUSED
    }

    /// Whether the connection has learned it, either way.
    pub(crate) fn known(&self) -> bool {
        self.0.load(Ordering::Relaxed) != UNKNOWN
    }

    /// The server ran the command (`true`), or refused it (`false`).
    pub(crate) fn learned(&self, offered: bool) {
        self.0.store(if offered { OFFERED } else { REFUSED }, Ordering::Relaxed);
    }

    /// Forgets it (the connection was opened again).
    pub(crate) fn forget(&self) {
        self.0.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// What one connection learned of the commands it may use instead of a script.
#[derive(Debug, Default)]
pub(crate) struct OfferedCommands {
    /// `DELIFEQ` (Valkey 9.0).
    delifeq: Offered,
    /// `DELEX … IFEQ` (Redis 8.4).
    delex: Offered,
    /// `SET … IFEQ … PX` (Valkey 8.1, Redis 8.4).
    pub(crate) compare_and_set: Offered,
}

impl OfferedCommands {
    /// What the connection learned of `command`.
    pub(crate) fn compare_and_delete(&self, command: CompareAndDelete) -> &Offered {
        match command {
            CompareAndDelete::DelIfEq => &self.delifeq,
            CompareAndDelete::DelEx => &self.delex,
        }
    }

    /// Forgets all of it.
    pub(crate) fn forget(&self) {
        self.delifeq.forget();
        self.delex.forget();
        self.compare_and_set.forget();
    }
}
