//! What a socket of direct calls connects to, and on a Redis Cluster which master serves each slot.

use crate::keys::SLOTS;

/// What a socket for direct calls connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectTarget {
    /// The locker's one server.
    Server,
    /// One master of the locker's Redis Cluster: `host:port` as [`ClusterMap`] names it, and a slot it serves.
    Master { address: String, slot: u16 },
}

/// One range of slots of a `CLUSTER SLOTS` reply and its master, `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    pub start: i64,
    pub end: i64,
    pub master: String,
}

/// Which master of a Redis Cluster serves each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMap {
    /// The masters, `host:port`.
    pub masters: Vec<String>,
    /// For each slot, the index of its master in `masters`; [`ClusterMap::UNSERVED`] for a slot no master serves.
    owners: Vec<u16>,
}

impl ClusterMap {
    /// The owner of a slot no master serves.
    const UNSERVED: u16 = u16::MAX;

    /// The map of the ranges of a `CLUSTER SLOTS` reply (ranges out of bounds are clamped to them).
    pub fn new(ranges: impl IntoIterator<Item = SlotRange>) -> Self {
        let mut map = Self { masters: Vec::new(), owners: vec![Self::UNSERVED; usize::from(SLOTS)] };
        let last = i64::from(SLOTS) - 1;
        for SlotRange { start, end, master } in ranges {
            let index = map.masters.iter().position(|m| *m == master).unwrap_or_else(|| {
                map.masters.push(master);
                map.masters.len() - 1
            });
            let (start, end) = (start.clamp(0, last) as usize, end.clamp(0, last) as usize);
            for owner in &mut map.owners[start..=end.max(start)] {
                *owner = index as u16;
            }
        }
        map
    }

    /// The index in `masters` of the master that serves `slot`, if any.
    pub fn master_of(&self, slot: u16) -> Option<usize> {
        self.owners.get(usize::from(slot)).copied().filter(|&o| o != Self::UNSERVED).map(usize::from)
    }

    /// What a socket to master `index` connects to.
    pub fn target(&self, index: usize) -> DirectTarget {
        let slot = self.owners.iter().position(|&o| usize::from(o) == index).unwrap_or(0) as u16;
        DirectTarget::Master { address: self.masters[index].clone(), slot }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slot_goes_to_the_master_of_its_range() {
        let range = |start, end, master: &str| SlotRange { start, end, master: master.to_owned() };
        let map = ClusterMap::new([range(0, 99, "a:1"), range(100, 16383, "b:2"), range(5, 9, "a:1")]);
        assert_eq!(map.masters, ["a:1", "b:2"]);
        assert_eq!((map.master_of(0), map.master_of(100), map.master_of(16383)), (Some(0), Some(1), Some(1)));
        assert_eq!(map.target(1), DirectTarget::Master { address: "b:2".into(), slot: 100 });
        let partial = ClusterMap::new([range(0, 10, "a:1")]);
        assert_eq!(partial.master_of(11), None);
    }
}
