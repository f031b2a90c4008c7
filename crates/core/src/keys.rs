//! The Redis names derived from a user's key.

/// Longest key accepted, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// The Redis names one lock uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The key as the user gave it.
    pub key: String,
    /// `prefix + key`: holds the owner's token, with the lease as its TTL.
    pub lock: String,
    /// `{prefix + key}:fence`: the fencing counter. It hashes to the same cluster slot as `lock` (the hash tag is
    /// the whole lock key) and never expires, so fences keep increasing.
    pub fence: String,
}

impl LockKeys {
    /// Validates `key` and derives its names under `prefix`.
    pub fn new(prefix: &str, key: &str) -> Result<Self, crate::SnatchError> {
        validate_key(key)?;
        // Concatenated rather than formatted: this runs once per acquisition.
        let lock = [prefix, key].concat();
        Ok(Self { key: key.to_owned(), fence: ["{", &lock, "}:fence"].concat(), lock })
    }

    /// The claim of occurrence `tick_ms` of the schedule whose run lock is `run`: key `name:<tick_ms>`, sharing the
    /// run lock's fence counter (fences stay per schedule, and claims leave no counter behind).
    pub fn occurrence(run: &LockKeys, tick_ms: i64) -> Self {
        let lock = format!("{}:{tick_ms}", run.lock);
        Self { key: format!("{}:{tick_ms}", run.key), fence: run.fence.clone(), lock }
    }

    /// `{prefix + key}:released`: the pub/sub channel on which a release wakes waiters (the release script derives
    /// it from the lock key the same way). Made when needed: only waiting acquisitions listen.
    pub fn channel(&self) -> String {
        ["{", &self.lock, "}:released"].concat()
    }
}

/// Rejects an empty key or one over [`MAX_KEY_BYTES`].
pub fn validate_key(key: &str) -> Result<(), crate::SnatchError> {
    if key.is_empty() {
        return Err(crate::SnatchError::type_arg("key must be a non-empty string"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(crate::SnatchError::range_arg(format!(
            "key is {} bytes long; the limit is {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_the_lock_key_as_hash_tag() {
        let k = LockKeys::new("snatch:", "report:daily").unwrap();
        assert_eq!(k.lock, "snatch:report:daily");
        assert_eq!(k.fence, "{snatch:report:daily}:fence");
        assert_eq!(k.channel(), "{snatch:report:daily}:released");
    }

    #[test]
    fn rejects_empty_and_oversized_keys() {
        assert_eq!(LockKeys::new("p", "").unwrap_err().code(), "ERR_SNATCH_INVALID_ARG");
        assert!(LockKeys::new("p", &"x".repeat(MAX_KEY_BYTES)).is_ok());
        let err = LockKeys::new("p", &"x".repeat(MAX_KEY_BYTES + 1)).unwrap_err();
        assert!(matches!(err, crate::SnatchError::InvalidArg { kind: crate::ArgKind::Range, .. }));
    }
}
