//! Which locks this process acquired lately, to guess whether a lock's fence counter exists before acquiring it. A
//! lock acquired lately most likely has its counter, and its acquisition goes as a transaction, the cheapest for
//! Redis; one not seen lately (a key locked for the first time, an order's or an event's id) most likely has none and
//! goes by the acquire script, which raises a new counter to the server clock in the same round trip. A wrong guess
//! costs time, never safety: the script is right for any lock, and a transaction that finds a new counter is
//! followed by the script (see [`crate::acquisition::Acquired::NewCounter`]).

use rustc_hash::FxHasher;
use std::hash::Hasher;

/// How many locks [`RecentLocks`] remembers at most (a power of two).
pub const REMEMBERED: usize = 8192;

/// The locks acquired lately: a fixed table of their names' hashes (64 KiB), in which a lock takes the slot of its
/// hash, displacing whichever lock had it.
#[derive(Debug)]
pub struct RecentLocks {
    slots: Box<[u64]>,
}

impl Default for RecentLocks {
    fn default() -> Self {
        Self { slots: vec![0; REMEMBERED].into_boxed_slice() }
    }
}

impl RecentLocks {
    /// Notes that lock `lock` (its Redis name) is being acquired; whether it was acquired lately (its counter then
    /// most likely exists).
    pub fn note(&mut self, lock: &str) -> bool {
        let mut hasher = FxHasher::default();
        hasher.write(lock.as_bytes());
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
    fn a_lock_is_new_once_then_remembered() {
        let mut recent = RecentLocks::default();
        assert!(!recent.note("snatch:a"));
        assert!(recent.note("snatch:a"));
        assert!(!recent.note("snatch:b"));
        assert!(recent.note("snatch:a"), "another lock in another slot leaves it");
    }

    #[test]
    fn it_remembers_a_bounded_number_of_locks() {
        let mut recent = RecentLocks::default();
        let keys: Vec<String> = (0..4 * REMEMBERED).map(|n| format!("k{n}")).collect();
        for key in &keys {
            recent.note(key);
        }
        let remembered = keys.iter().filter(|key| recent.note(key)).count();
        assert!(remembered < REMEMBERED, "{remembered}");
        // A working set of a few hundred locks mostly goes by transactions (each pair of locks that share a slot
        // misses twice here: about 30 of 500).
        let mut recent = RecentLocks::default();
        let working: Vec<String> = (0..500).map(|n| format!("w{n}")).collect();
        for key in &working {
            recent.note(key);
        }
        let seen = working.iter().filter(|key| recent.note(key)).count();
        assert!(seen >= 450, "{seen} of 500");
    }
}
