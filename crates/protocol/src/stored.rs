//! Stored schedules' names in Redis, without I/O: the due index (one sorted set per handler in each of [`BUCKETS`]
//! buckets, each bucket under a hash tag of its own, so that on a cluster they spread over the slots), the live
//! runners of each handler, and the bounds of what a stored schedule may hold. A stored schedule's own keys are a
//! code schedule's of the same name ([`crate::schedule::ScheduleKeys`]: one namespace), its spec in its state.

use crate::keys::has_hash_tag;
use std::time::Duration;

/// How many buckets the due index is spread over.
pub const BUCKETS: u32 = 16;

/// Longest stored schedule id, in bytes.
pub const MAX_ID_BYTES: usize = 512;

/// Longest handler name, in bytes.
pub const MAX_HANDLER_BYTES: usize = 256;

/// Largest `data` (its JSON), in bytes.
pub const MAX_DATA_BYTES: usize = 8 * 1024;

/// How many occurrence records a stored schedule keeps by default (`history`).
pub const DEFAULT_STORED_HISTORY: u32 = 10;

/// How long a finished stored schedule (its `at` done, its `limit` or `endAt` reached) is kept before it is removed.
pub const FINISHED_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The bucket of stored schedule `id`: FNV-1a of its bytes.
pub fn bucket_of(id: &str) -> u32 {
    let hash =
        id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3));
    (hash % u64::from(BUCKETS)) as u32
}

/// The names of one bucket of the due index under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketKeys {
    base: String,
}

impl BucketKeys {
    /// Bucket `bucket` under `prefix`: `{<prefix>stored:<bucket>}`, or without braces when the prefix has a hash tag of
    /// its own (every key is then in its slot).
    pub fn new(prefix: &str, bucket: u32) -> Self {
        let name = format!("{prefix}stored:{bucket}");
        let base = if has_hash_tag(prefix) { name } else { format!("{{{name}}}") };
        Self { base }
    }

    /// A sorted set of the handler names in use in the bucket.
    pub fn handlers(&self) -> String {
        format!("{}:handlers", self.base)
    }

    /// Handler `handler`'s due index in the bucket: stored schedule id → when it next needs a runner (server ms).
    pub fn due(&self, handler: &str) -> String {
        format!("{}:due:{handler}", self.base)
    }

    /// The channel on which a schedule placed due soon wakes the runners.
    pub fn wake(&self) -> String {
        format!("{}:wake", self.base)
    }
}

/// The sorted set of live runners under `prefix`: `<handler>\n<instance>` → when the registration lapses (server ms).
pub fn runners_key(prefix: &str) -> String {
    format!("{prefix}stored:runners")
}

/// The member of [`runners_key`] for `instance` running `handler`.
pub fn runner(handler: &str, instance: &str) -> String {
    format!("{handler}\n{instance}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_spread_over_every_bucket_and_each_bucket_has_a_tag_of_its_own() {
        let mut seen = [0u32; BUCKETS as usize];
        for n in 0..10_000 {
            seen[bucket_of(&format!("user:{n}:digest")) as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 400), "{seen:?}");
        assert_eq!(BucketKeys::new("snatch:", 3).due("mail"), "{snatch:stored:3}:due:mail");
        assert_eq!(BucketKeys::new("{app}:", 3).wake(), "{app}:stored:3:wake");
    }
}
