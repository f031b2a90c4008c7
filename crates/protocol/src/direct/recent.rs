//! Which fence counters this process counted up lately, to guess whether a lock's counter exists before acquiring
//! it. A counter counted up lately most likely exists, and the acquisition goes as a plain transaction, the cheapest
//! for Redis; one not seen lately (the first lock of a prefix on a server or a cluster slot, or a semaphore's) may
//! not, and its transaction also gives a new counter a floor from the server clock (clock.rs). A wrong guess costs
//! time, never safety: a transaction that finds a new counter is followed by the acquire script (see
//! [`crate::acquisition::Acquired::NewCounter`]).

use crate::keys;
use rustc_hash::FxHasher;
use std::hash::Hasher;

/// How many counters [`RecentCounters`] remembers at most: one per cluster slot.
pub const REMEMBERED: usize = keys::SLOTS as usize;

/// The counters counted up lately: a fixed table (64 KiB) of a fingerprint of their names, in which a counter takes
/// the entry of its cluster slot, displacing whichever counter had it. A locker's locks share one counter per slot
/// (keys.rs), so on a cluster, where new keys spread over every slot, the table holds all of their counters at once.
#[derive(Debug)]
pub struct RecentCounters {
    slots: Box<[u32]>,
}

impl Default for RecentCounters {
    fn default() -> Self {
        Self { slots: vec![0; REMEMBERED].into_boxed_slice() }
    }
}

impl RecentCounters {
    /// Notes that `counter` (its Redis name) is being counted up; whether it was lately (it then most likely exists).
    /// `slot` is the counter's cluster slot on a cluster, where a locker's locks count up one counter per slot; on a
    /// single server, where they count up one, any (say 0: no slot to compute for each call).
    pub fn note(&mut self, counter: &str, slot: u16) -> bool {
        let mut hasher = FxHasher::default();
        hasher.write(counter.as_bytes());
        // The top bits, well mixed; never 0, which marks an empty entry.
        let fingerprint = (hasher.finish() >> 32) as u32 | 1;
        let entry = &mut self.slots[usize::from(slot % keys::SLOTS)];
        let seen = *entry == fingerprint;
        *entry = fingerprint;
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Notes `counter` in the entry of its cluster slot.
    fn note(recent: &mut RecentCounters, counter: &str) -> bool {
        recent.note(counter, keys::slot(counter))
    }

    #[test]
    fn a_counter_is_new_once_then_remembered() {
        let mut recent = RecentCounters::default();
        assert!(!note(&mut recent, "snatch:a"));
        assert!(note(&mut recent, "snatch:a"));
        assert!(!note(&mut recent, "snatch:b"));
        assert!(note(&mut recent, "snatch:a"), "another counter in another slot leaves it");
    }

    #[test]
    fn it_remembers_a_bounded_number_of_counters() {
        let mut recent = RecentCounters::default();
        let keys: Vec<String> = (0..4 * REMEMBERED).map(|n| format!("k{n}")).collect();
        for key in &keys {
            note(&mut recent, key);
        }
        let remembered = keys.iter().filter(|key| note(&mut recent, key)).count();
        assert!(remembered < REMEMBERED, "{remembered}");
        // A working set of a few hundred counters is mostly remembered (each pair of counters that share a slot
        // misses twice here: about 30 of 500).
        let mut recent = RecentCounters::default();
        let working: Vec<String> = (0..500).map(|n| format!("w{n}")).collect();
        for key in &working {
            note(&mut recent, key);
        }
        let seen = working.iter().filter(|key| note(&mut recent, key)).count();
        assert!(seen >= 450, "{seen} of 500");
    }

    #[test]
    fn it_remembers_the_counter_of_every_slot_of_a_cluster() {
        // New keys on a cluster: each lock counts up its prefix's counter in its slot (keys.rs), all 16,384 of them.
        let counters: Vec<String> =
            (0..100_000).map(|n| keys::LockKeys::new("snatch:", &format!("order:{n}"), true).unwrap().fence).collect();
        let mut recent = RecentCounters::default();
        for counter in &counters {
            note(&mut recent, counter);
        }
        assert!(counters.iter().all(|counter| note(&mut recent, counter)));
    }
}
