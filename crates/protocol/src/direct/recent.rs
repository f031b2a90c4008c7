//! Which fence counters this process counted up lately, to guess whether a lock's counter exists before acquiring
//! it. A counter counted up lately most likely exists, and the acquisition goes as a plain transaction, the cheapest
//! for Redis; one not seen lately (the first lock of a prefix on a server or a cluster slot, or a semaphore's) may
//! not, and its transaction also gives a new counter a floor from the server clock (clock.rs). A wrong guess costs
//! time, never safety: a transaction that finds a new counter is followed by the acquire script (see
//! [`crate::acquisition::Acquired::NewCounter`]).

use rustc_hash::FxHasher;
use std::hash::Hasher;

/// How many counters [`RecentCounters`] remembers at most (a power of two).
pub const REMEMBERED: usize = 8192;

/// The counters counted up lately: a fixed table of their names' hashes (64 KiB), in which a counter takes the slot of
/// its hash, displacing whichever counter had it.
#[derive(Debug)]
pub struct RecentCounters {
    slots: Box<[u64]>,
}

impl Default for RecentCounters {
    fn default() -> Self {
        Self { slots: vec![0; REMEMBERED].into_boxed_slice() }
    }
}

impl RecentCounters {
    /// Notes that `counter` (its Redis name) is being counted up; whether it was lately (it then most likely exists).
    pub fn note(&mut self, counter: &str) -> bool {
        let mut hasher = FxHasher::default();
        hasher.write(counter.as_bytes());
        // Never 0, which marks an empty slot.
        let hash = hasher.finish() | 1;
        // Fibonacci hashing: the top bits of the product, well mixed whatever the key.
        let slot =
            &mut self.slots[(hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - REMEMBERED.trailing_zeros())) as usize];
        let seen = *slot == hash;
        *slot = hash;
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_new_once_then_remembered() {
        let mut recent = RecentCounters::default();
        assert!(!recent.note("snatch:a"));
        assert!(recent.note("snatch:a"));
        assert!(!recent.note("snatch:b"));
        assert!(recent.note("snatch:a"), "another counter in another slot leaves it");
    }

    #[test]
    fn it_remembers_a_bounded_number_of_counters() {
        let mut recent = RecentCounters::default();
        let keys: Vec<String> = (0..4 * REMEMBERED).map(|n| format!("k{n}")).collect();
        for key in &keys {
            recent.note(key);
        }
        let remembered = keys.iter().filter(|key| recent.note(key)).count();
        assert!(remembered < REMEMBERED, "{remembered}");
        // A working set of a few hundred counters is mostly remembered (each pair of counters that share a slot
        // misses twice here: about 30 of 500).
        let mut recent = RecentCounters::default();
        let working: Vec<String> = (0..500).map(|n| format!("w{n}")).collect();
        for key in &working {
            recent.note(key);
        }
        let seen = working.iter().filter(|key| recent.note(key)).count();
        assert!(seen >= 450, "{seen} of 500");
    }
}
