//! The Redis names derived from a user's key, and the cluster slot a name hashes to.

use crate::error::SnatchError;

/// Longest key accepted, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// The Redis names one lock uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The key as the user gave it.
    pub key: String,
    /// `prefix + key`: holds the owner's token, with the lease as its TTL.
    pub lock: String,
    /// The fencing counter the lock's fences come from, kept `fenceTtl` after its last acquisition; a counter that
    /// starts again starts from the server's clock ([`CLOCK_FLOOR`]), so fences keep increasing. A lock's is its
    /// prefix's ([`prefix_counter`]), which every lock of the prefix in its slot counts up; a semaphore's is its own
    /// (`{prefix + key}:fence`).
    pub fence: String,
    /// What `lock` holds, which decides the scripts that take, extend and release it.
    pub kind: Kind,
    /// The lock's cluster slot, computed once when the names are made for a cluster (`one_slot`), where each call
    /// on the lock needs it (its master, its counter); `None` on a single server, which needs none.
    slot: Option<u16>,
}

/// What a [`LockKeys`]'s `lock` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A lock: its holder's token.
    Lock,
    /// A semaphore of at most this many holders: a sorted set of their tokens (see protocol/scripts.rs).
    Semaphore(u32),
    /// A read lock of a read-write lock: `lock` is its readers, a sorted set as a semaphore's; `writer` its writer's
    /// key, on whose channel its waiters are woken.
    Read { writer: String },
    /// The write lock of a read-write lock: `lock` is its writer's key (see [`LockKeys::read_write`]), `readers` its
    /// readers.
    Write { readers: String },
}

impl Kind {
    /// Whether the lock is a holder's entry in a sorted set (a semaphore's permit, a read lock), extended and released
    /// by the permit scripts.
    pub fn in_a_set(&self) -> bool {
        matches!(self, Self::Semaphore(_) | Self::Read { .. })
    }
}

impl LockKeys {
    /// Validates `key` and derives its names under `prefix`. With `one_slot` (Redis Cluster) every name hashes to
    /// the lock key's slot, as the scripts need, even when the lock key has a hash tag of its own (say, a prefix
    /// like `{app}:`).
    pub fn new(prefix: &str, key: &str, one_slot: bool) -> Result<Self, SnatchError> {
        let lock = lock_name(prefix, key, one_slot)?;
        let slot = one_slot.then(|| slot(&lock));
        let fence = prefix_counter(prefix, slot).unwrap_or_else(|| companion(&lock, one_slot, "fence"));
        Ok(Self { key: key.to_owned(), fence, lock, kind: Kind::Lock, slot })
    }

    /// The names of semaphore `key` of `limit` holders, as [`LockKeys::new`] derives a lock's (a lock and a semaphore
    /// must not share a key), with a fence counter of its own, `{prefix + key}:fence` (see [`LockKeys::companion`]).
    /// A `limit` of 0 is refused.
    pub fn semaphore(prefix: &str, key: &str, limit: u32, one_slot: bool) -> Result<Self, SnatchError> {
        if limit == 0 {
            return Err(SnatchError::range_arg("limit must be a positive integer, got 0"));
        }
        let lock = lock_name(prefix, key, one_slot)?;
        let fence = companion(&lock, one_slot, "fence");
        let slot = one_slot.then(|| slot(&lock));
        Ok(Self { key: key.to_owned(), fence, lock, kind: Kind::Semaphore(limit), slot })
    }

    /// The names of a read lock (or with `write` the write lock) of read-write lock `key`: its readers are
    /// `prefix + key`, as a semaphore's holders, and its writer's key is beside it ([`LockKeys::beside`]:
    /// `prefix + key:writer`, on a cluster `{prefix + key}:writer`), so that its channel, on which every waiter of the
    /// lock is woken, is under the prefix as the others are (the ACL of docs/deployments.md); fences come from the
    /// prefix's counter, as a lock's.
    pub fn read_write(prefix: &str, key: &str, write: bool, one_slot: bool) -> Result<Self, SnatchError> {
        let readers = Self::new(prefix, key, one_slot)?;
        let writer = readers.beside("writer", one_slot);
        Ok(if write {
            Self { kind: Kind::Write { readers: readers.lock.clone() }, lock: writer, ..readers }
        } else {
            Self { kind: Kind::Read { writer }, ..readers }
        })
    }

    /// The claim of an attempt of an occurrence of the schedule whose run lock is `run`: key `name:<attempt>`
    /// (`attempt` as schedule.rs names it: the tick in epoch ms for the first attempt of a scheduled occurrence),
    /// sharing the run lock's fence counter (fences stay per schedule, and claims leave no counter behind). With
    /// `one_slot` the claim is `{name}:<attempt>` unless `name` has a hash tag, so that it hashes to the counter's slot.
    pub fn occurrence(run: &LockKeys, attempt: &str, one_slot: bool) -> Self {
        Self {
            key: format!("{}:{attempt}", run.key),
            fence: run.fence.clone(),
            lock: run.beside(attempt, one_slot),
            kind: Kind::Lock,
            slot: one_slot.then(|| run.slot()),
        }
    }

    /// A name beside the lock key that hashes to its slot: `lock:<suffix>` on a single Redis, or when the lock key has
    /// a hash tag of its own; `{lock}:<suffix>` with `one_slot` otherwise (as the fence counter's).
    pub fn beside(&self, suffix: &str, one_slot: bool) -> String {
        if one_slot && !has_hash_tag(&self.lock) {
            format!("{{{}}}:{suffix}", self.lock)
        } else {
            format!("{}:{suffix}", self.lock)
        }
    }

    /// Where a semaphore keeps its limit as its last acquisition gave it, named like its fence counter and kept as
    /// long (`{prefix + key}:limit`; see [`companion`]): what the fleet's view reports as the semaphore's limit (the
    /// limit itself is each caller's).
    pub fn limit_key(&self, one_slot: bool) -> String {
        self.companion("limit", one_slot)
    }

    /// The queue of the lock's (or the semaphore's) fair waiters, `{prefix + key}:queue`, and their places,
    /// `{prefix + key}:places` (see [`LockKeys::companion`]; scripts/queue.lua). The release scripts name the queue the
    /// same way (wake.lua's `first_waiter`).
    pub fn queue(&self, one_slot: bool) -> [String; 2] {
        [self.companion("queue", one_slot), self.companion("places", one_slot)]
    }

    /// The cluster slot of the lock (which master of a cluster a call on it goes to): computed when the names were
    /// made for a cluster, else now.
    pub fn slot(&self) -> u16 {
        self.slot.unwrap_or_else(|| slot(&self.lock))
    }

    /// The pub/sub channel on which a release wakes waiters, `{prefix + key}:released` (see [`LockKeys::companion`]: on a
    /// cluster it hashes to the lock key's slot, as a sharded channel must; the scripts derive it the same way:
    /// wake.lua). Made when needed: only waiting acquisitions listen.
    pub fn channel(&self, one_slot: bool) -> String {
        match &self.kind {
            // A read-write lock's waiters, readers and writers, are woken on its writer's channel.
            Kind::Read { writer } => companion(writer, one_slot, "released"),
            _ => self.companion("released", one_slot),
        }
    }

    /// A name that belongs to the lock: `{lock}:<suffix>`, whose hash tag is the whole lock key, so that it hashes to
    /// the lock key's cluster slot; with `one_slot` (Redis Cluster) and a lock key that has a hash tag of its own,
    /// `lock:<suffix>`, which keeps that tag.
    pub fn companion(&self, suffix: &str, one_slot: bool) -> String {
        companion(&self.lock, one_slot, suffix)
    }
}

/// `prefix + key`, once `key` is checked; on a cluster (`one_slot`) it must not hold a `}` outside a hash tag.
fn lock_name(prefix: &str, key: &str, one_slot: bool) -> Result<String, SnatchError> {
    validate_key(key)?;
    // Concatenated rather than formatted: this runs once per acquisition.
    let lock = [prefix, key].concat();
    if one_slot && !has_hash_tag(&lock) && lock.contains('}') {
        // Neither wrapping it in braces nor a suffix would hash to its slot.
        return Err(SnatchError::type_arg(format!(
            "on a Redis Cluster, a key with '}}' must hold a hash tag ('{{tag}}'): '{lock}' does not"
        )));
    }
    Ok(lock)
}

fn companion(lock: &str, one_slot: bool, suffix: &str) -> String {
    if one_slot && has_hash_tag(lock) {
        [lock, ":", suffix].concat()
    } else {
        ["{", lock, "}:", suffix].concat()
    }
}

/// Whether the locks under `prefix` count up its counters ([`prefix_counter`]: one on a single Redis, one per slot on a
/// cluster with `one_slot`) rather than counters of their own.
pub fn prefix_has_counters(prefix: &str, one_slot: bool) -> bool {
    prefix_counter(prefix, one_slot.then_some(0)).is_some()
}

/// The fence counter of every lock under `prefix` that hashes to the lock's slot: `{prefix}:fence` on a single Redis
/// (`slot` is `None`); on a cluster `prefix:fence` when the prefix has a hash tag of its own (every lock under it
/// hashes to that tag's slot), else `{prefix<tag>}:fence`, where `<tag>` makes it hash to `slot` ([`slot_suffix`]).
/// Each of these names begins with the prefix or with `{` and the prefix, as a counter always did (the ACL rules of
/// docs/deployments.md). `None` for a cluster prefix with an unpaired brace, which no such name can follow: its locks
/// keep counters of their own.
fn prefix_counter(prefix: &str, slot: Option<u16>) -> Option<String> {
    let Some(slot) = slot else {
        return Some(["{", prefix, "}:fence"].concat());
    };
    if has_hash_tag(prefix) {
        return Some([prefix, ":fence"].concat());
    }
    // Bytes rather than chars: a search for either of two chars decodes every char.
    if prefix.bytes().any(|b| b == b'{' || b == b'}') {
        return None;
    }
    Some(["{", prefix, slot_suffix(prefix, slot), "}:fence"].concat())
}

/// Letters of [`SUFFIX_LEN`] to end `prefix` with so that it hashes to `slot`. CRC16 (XMODEM) is linear with a zero
/// start, so the CRC of `prefix + suffix` is that of `prefix` followed by as many zero bytes, XOR that of `suffix`: a
/// table of one suffix for each CRC's low 14 bits (the slot) serves every prefix. The table holds the letters
/// themselves (64 KiB), so that a lookup on a cluster, where new keys fall in any slot, is one load.
fn slot_suffix(prefix: &str, slot: u16) -> &'static str {
    static SUFFIXES: std::sync::OnceLock<Box<[[u8; SUFFIX_LEN]]>> = std::sync::OnceLock::new();
    let suffixes = SUFFIXES.get_or_init(|| {
        let mut table = vec![[0; SUFFIX_LEN]; usize::from(SLOTS)].into_boxed_slice();
        // Every string of SUFFIX_LEN letters from '@' to 'O' (0x40–0x4F): a CRC's low 14 bits of each of 16^4.
        for n in 0..16u32.pow(SUFFIX_LEN as u32) {
            let suffix: [u8; SUFFIX_LEN] = std::array::from_fn(|i| b'@' + ((n >> (4 * i)) & 15) as u8);
            let entry = &mut table[usize::from(crc16(&suffix) % SLOTS)];
            if entry[0] == 0 {
                *entry = suffix;
            }
        }
        table
    });
    let mut padded = crc16::State::<crc16::XMODEM>::new();
    padded.update(prefix.as_bytes());
    padded.update(&[0; SUFFIX_LEN]);
    std::str::from_utf8(&suffixes[usize::from((padded.get() ^ slot) % SLOTS)]).expect("letters")
}

/// How many letters [`slot_suffix`] adds.
const SUFFIX_LEN: usize = 4;

fn crc16(bytes: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(bytes)
}

/// Whether Redis Cluster hashes `key` by a hash tag (a non-empty `{…}`, the first `{` to the first `}` after it)
/// rather than whole.
pub fn has_hash_tag(key: &str) -> bool {
    hash_tag(key).is_some()
}

/// The hash tag of `key`, if it has one (see [`has_hash_tag`]).
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let len = key[open + 1..].find('}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// A fence counter below this (2^50: the server clock's microseconds passed it in 2005) is new, or from before
/// counters expired: acquisitions raise it to the server clock's microseconds (scripts/fence.lua), so that a
/// counter that expired starts again above every fence it gave.
pub const CLOCK_FLOOR: i64 = 1 << 50;

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key, modulo [`SLOTS`].
pub fn slot(key: &str) -> u16 {
    crc16(hash_tag(key).unwrap_or(key).as_bytes()) % SLOTS
}

/// Rejects an empty key or one over [`MAX_KEY_BYTES`].
pub fn validate_key(key: &str) -> Result<(), SnatchError> {
    if key.is_empty() {
        return Err(SnatchError::type_arg("key must be a non-empty string"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(SnatchError::range_arg(format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", key.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_counts_its_prefixs_counter_and_a_semaphore_its_own() {
        for one_slot in [false, true] {
            let k = LockKeys::new("snatch:", "report:daily", one_slot).unwrap();
            assert_eq!(k.lock, "snatch:report:daily");
            assert_eq!(k.channel(one_slot), "{snatch:report:daily}:released");
            let s = LockKeys::semaphore("snatch:", "report:daily", 3, one_slot).unwrap();
            assert_eq!((s.lock.as_str(), s.fence.as_str()), ("snatch:report:daily", "{snatch:report:daily}:fence"));
            assert_eq!(s.limit_key(one_slot), "{snatch:report:daily}:limit");
        }
        assert_eq!(LockKeys::new("snatch:", "report:daily", false).unwrap().fence, "{snatch:}:fence");
        assert_eq!(LockKeys::new("snatch:", "order:42", false).unwrap().fence, "{snatch:}:fence");
        let claim = LockKeys::occurrence(&LockKeys::new("snatch:", "report", false).unwrap(), "7", false);
        assert_eq!((claim.lock.as_str(), claim.fence.as_str()), ("snatch:report:7", "{snatch:}:fence"));
    }

    #[test]
    fn on_a_cluster_every_name_hashes_to_the_lock_keys_slot() {
        let cases =
            [("snatch:", "report"), ("{app}:", "report"), ("snatch:", "a{b}c"), ("p", "a{b"), ("a{b", "c}"), ("", "k")];
        for (prefix, key) in cases {
            let run = LockKeys::new(prefix, key, true).unwrap();
            assert_eq!(slot(&run.fence), slot(&run.lock), "{prefix}{key}: {}", run.fence);
            assert!(run.fence.starts_with(prefix) || run.fence.starts_with(&["{", prefix].concat()), "{}", run.fence);
            assert_eq!(slot(&run.channel(true)), slot(&run.lock), "{prefix}{key}: {}", run.channel(true));
            assert_eq!(slot(&run.limit_key(true)), slot(&run.lock), "{prefix}{key}: {}", run.limit_key(true));
            let claim = LockKeys::occurrence(&run, "1700000000000", true);
            assert_eq!(slot(&claim.lock), slot(&run.lock), "{prefix}{key}: {}", claim.lock);
            // The slot kept with the names is the lock key's, for a semaphore, a claim and a write lock too.
            let semaphore = LockKeys::semaphore(prefix, key, 2, true).unwrap();
            let write = LockKeys::read_write(prefix, key, true, true).unwrap();
            for (keys, lock) in
                [(&run, &run.lock), (&semaphore, &semaphore.lock), (&claim, &claim.lock), (&write, &write.lock)]
            {
                assert_eq!(keys.slot, Some(slot(lock)), "{prefix}{key}: {lock}");
            }
            assert_ne!(claim.lock, run.lock);
            assert_eq!(claim.fence, run.fence);
        }
        let tagged = LockKeys::new("{app}:", "report", true).unwrap();
        assert_eq!(tagged.fence, "{app}::fence");
        assert_eq!(tagged.limit_key(true), "{app}:report:limit");
        assert_eq!(LockKeys::occurrence(&tagged, "7", true).lock, "{app}:report:7");
        assert_eq!(LockKeys::occurrence(&LockKeys::new("s:", "r", true).unwrap(), "7", true).lock, "{s:r}:7");
        // A prefix with an unpaired brace: each lock keeps a counter of its own.
        assert_eq!(LockKeys::new("a{b", "c}", true).unwrap().fence, "a{bc}:fence");
        // Keys of one slot share a counter; keys of another slot have another.
        let fence = |key: &str| LockKeys::new("snatch:", key, true).unwrap().fence;
        assert_eq!(fence("{42}:a"), fence("{42}:b"));
        assert_ne!(fence("a"), fence("b"));
        for key in ["a}b", "a{}b}"] {
            assert_eq!(LockKeys::new("p:", key, true).unwrap_err().code(), "ERR_SNATCH_INVALID_ARG", "{key}");
            assert!(LockKeys::new("p:", key, false).is_ok(), "{key} is fine on a single Redis");
        }
    }

    #[test]
    fn a_read_write_locks_names_share_a_slot_and_its_waiters_a_channel() {
        for one_slot in [false, true] {
            for (prefix, key) in [("snatch:", "doc"), ("{app}:", "doc"), ("snatch:", "doc{7}")] {
                let read = LockKeys::read_write(prefix, key, false, one_slot).unwrap();
                let write = LockKeys::read_write(prefix, key, true, one_slot).unwrap();
                assert_eq!(read.lock, [prefix, key].concat());
                assert_eq!(read.kind, Kind::Read { writer: write.lock.clone() });
                assert_eq!(write.kind, Kind::Write { readers: read.lock.clone() });
                assert_eq!(
                    (read.fence.as_str(), read.channel(one_slot)),
                    (write.fence.as_str(), write.channel(one_slot))
                );
                assert!(read.kind.in_a_set() && !write.kind.in_a_set());
                if one_slot {
                    for name in [&write.lock, &read.fence, &read.channel(true)] {
                        assert_eq!(slot(name), slot(&read.lock), "{name}");
                    }
                }
            }
        }
        let write = LockKeys::read_write("snatch:", "doc", true, false).unwrap();
        assert_eq!(
            (write.lock.as_str(), write.channel(false)),
            ("snatch:doc:writer", "{snatch:doc:writer}:released".into())
        );
        let write = LockKeys::read_write("snatch:", "doc", true, true).unwrap();
        assert_eq!(
            (write.lock.as_str(), write.channel(true)),
            ("{snatch:doc}:writer", "{snatch:doc}:writer:released".into())
        );
        assert_eq!(LockKeys::read_write("{app}:", "doc", true, true).unwrap().lock, "{app}:doc:writer");
    }

    #[test]
    fn every_slot_has_a_prefix_counter() {
        for prefix in ["", "snatch:", "a-much-longer-prefix/with/parts:"] {
            for s in 0..SLOTS {
                let suffix = slot_suffix(prefix, s);
                assert_eq!(slot(&["{", prefix, suffix, "}:fence"].concat()), s, "{prefix:?} {s}");
            }
        }
    }

    #[test]
    fn slots_follow_the_cluster_spec() {
        // Redis' own examples (cluster spec): CRC16's check value, and the same slot for the same tag. snatch-core's
        // tests compare every slot with the redis crate's.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("a{b}c"), slot("b"));
    }

    #[test]
    fn hash_tags_follow_redis_rules() {
        assert!(has_hash_tag("a{b}c"));
        assert!(!has_hash_tag("a{}b"));
        assert!(!has_hash_tag("a{b"));
        assert!(!has_hash_tag("a}b{"));
        assert!(!has_hash_tag("{}x{y}"), "the first '{{' decides, and its tag is empty");
    }

    #[test]
    fn rejects_empty_and_oversized_keys() {
        assert_eq!(LockKeys::new("p", "", false).unwrap_err().code(), "ERR_SNATCH_INVALID_ARG");
        assert!(LockKeys::new("p", &"x".repeat(MAX_KEY_BYTES), false).is_ok());
        let err = LockKeys::new("p", &"x".repeat(MAX_KEY_BYTES + 1), false).unwrap_err();
        assert!(matches!(err, SnatchError::InvalidArg { kind: crate::ArgKind::Range, .. }));
    }

    /// A model of a prefix's fence counter shared by lockers that keep it for different times (`fenceTtl`):
    /// acquisitions at random times, each by a locker with its own ttl, count the counter up (from 0 when it does not
    /// exist) and keep it that ttl from then; one found below [`CLOCK_FLOOR`] is raised to the server clock's µs, as
    /// scripts/fence.lua does. Every fence must be above every fence before it, whatever the ttls and the gaps. (A
    /// start that may lag the clock by up to the starting locker's ttl, as the direct connection's floor did until
    /// 0.3, fails it.)
    #[test]
    fn fences_only_rise_across_expiries_whatever_ttl_each_locker_keeps_the_counter() {
        use proptest::prelude::*;
        let ttl_ms = prop_oneof![1i64..50, 1i64..10_000, Just(7 * 24 * 3_600_000)];
        // Gaps of any size, and ones right at a ttl, where a counter just expired or just did not.
        let gap_us = prop_oneof![0i64..20_000_000, 0i64..3_000];
        let steps = prop::collection::vec((gap_us, ttl_ms, any::<bool>()), 1..80);
        proptest!(|(steps in steps)| {
            let mut now_us: i64 = 1_800_000_000_000_000;
            // The counter: its value and when it expires (server ms); the last fence given.
            let mut counter: Option<(i64, i64)> = None;
            let mut last = i64::MIN;
            for (gap_us, ttl_ms, at_expiry) in steps {
                now_us += 1 + match (at_expiry, counter) {
                    // Right at the counter's expiry, give or take a few µs.
                    (true, Some((_, expires_ms))) => (expires_ms * 1000 - now_us).max(0) + gap_us % 3 - 1,
                    _ => gap_us,
                }
                .max(0);
                let now_ms = now_us / 1000;
                counter = counter.filter(|&(_, expires_ms)| now_ms <= expires_ms);
                let counted = counter.map_or(0, |(value, _)| value) + 1;
                let fence = if counted < CLOCK_FLOOR { counted.max(now_us) } else { counted };
                counter = Some((fence, now_ms + ttl_ms));
                prop_assert!(fence > last, "fence {} after {}", fence, last);
                last = fence;
            }
        });
    }
}
