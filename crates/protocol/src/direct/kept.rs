//! When a locker's direct acquisitions last kept each fence counter they count up (`PEXPIRE` by `fenceTtl`), so that
//! the next ones leave that out for a while: one command less per acquisition
//! (bench/results/2026-11-27-plain-commands.md). A counter's TTL is there so that nothing is left `fenceTtl` after the
//! last acquisition; fences do not depend on it, as a counter that expired starts again from the server clock
//! (acquisition.rs's [`crate::acquisition::Acquired::NewCounter`]).

use crate::keys::SLOTS;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A counter kept within the last `fenceTtl / KEPT_FOR` is not kept again, so it lives from `fenceTtl` (1 − 1 /
/// `KEPT_FOR`) to `fenceTtl` after the last acquisition.
const KEPT_FOR: u32 = 10;

/// When a locker's direct acquisitions last kept each counter: one on a single server, one per slot on a cluster.
pub struct KeptCounters {
    epoch: Instant,
    /// How long a counter kept is not kept again, in ms (0: always kept).
    window_ms: u64,
    /// For each counter, 1 + the ms from `epoch` to when the last acquisition that kept it was encoded; 0 when none
    /// did yet.
    kept: Box<[AtomicU64]>,
}

impl KeptCounters {
    /// The counters of a locker whose counters live `fence_ttl`: one per cluster slot with `one_slot`, else one.
    pub fn new(fence_ttl: Duration, one_slot: bool) -> Self {
        let counters = if one_slot { usize::from(SLOTS) } else { 1 };
        Self {
            epoch: Instant::now(),
            window_ms: (fence_ttl / KEPT_FOR).as_millis() as u64,
            kept: (0..counters).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether an acquisition encoded at `at` keeps counter `index` (a slot, or 0): when none kept it within the
    /// window before `at`.
    pub fn due(&self, index: usize, at: Instant) -> bool {
        let kept = self.kept[index].load(Ordering::Relaxed);
        kept == 0 || self.stamp(at).saturating_sub(kept) >= self.window_ms
    }

    /// An acquisition encoded at `at` kept counter `index`: Redis answered its `PEXPIRE`.
    pub fn kept(&self, index: usize, at: Instant) {
        self.kept[index].fetch_max(self.stamp(at), Ordering::Relaxed);
    }

    fn stamp(&self, at: Instant) -> u64 {
        1 + at.saturating_duration_since(self.epoch).as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_kept_again_once_a_tenth_of_fence_ttl_has_passed_since_it_was_last_kept() {
        let counters = KeptCounters::new(Duration::from_secs(10), true);
        let start = Instant::now();
        assert!(counters.due(7, start), "never kept");
        counters.kept(7, start);
        assert!(!counters.due(7, start + Duration::from_millis(999)));
        assert!(counters.due(8, start), "each slot its own");
        counters.kept(7, start - Duration::from_secs(5));
        assert!(!counters.due(7, start + Duration::from_millis(999)), "an older keeping changes nothing");
        assert!(counters.due(7, start + Duration::from_secs(1)));
        let short = KeptCounters::new(Duration::from_millis(9), false);
        short.kept(0, start);
        assert!(short.due(0, start), "a fenceTtl under 10 ms keeps the counter every time");
    }
}
