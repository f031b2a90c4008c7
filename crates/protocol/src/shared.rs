//! A shared result's entry in Redis (`locker.shared`): what a round's runner stored, a value or its error, with the
//! round's fence, and which entries a caller takes. Without I/O.

/// The first byte of a stored value's entry.
const VALUE: u8 = b'v';
/// The first byte of a stored error's entry.
const ERROR: u8 = b'e';
/// The tag and the fence (8 bytes, big-endian) before the payload.
const HEADER: usize = 9;

/// A round's stored result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The runner's error rather than its value.
    pub error: bool,
    /// The fence the runner held.
    pub fence: i64,
    /// The caller's bytes (the facade's encoding).
    pub payload: Vec<u8>,
}

impl Entry {
    /// The bytes stored for it.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER + self.payload.len());
        bytes.push(if self.error { ERROR } else { VALUE });
        bytes.extend_from_slice(&self.fence.to_be_bytes());
        bytes.extend_from_slice(&self.payload);
        bytes
    }

    /// The entry `bytes` hold; `None` for bytes that are no entry of ours.
    pub fn decode(mut bytes: Vec<u8>) -> Option<Self> {
        let error = match *bytes.first()? {
            VALUE => false,
            ERROR => true,
            _ => return None,
        };
        let fence = i64::from_be_bytes(bytes.get(1..HEADER)?.try_into().ok()?);
        bytes.drain(..HEADER);
        Some(Self { error, fence, payload: bytes })
    }
}

/// Which stored entries a caller takes. A value, always. An error only from a round it waited for, unless errors are
/// taken from any round (`storeErrors`): one found before it waited is an earlier round's, whose fence it then skips.
#[derive(Debug, Default)]
pub struct Reader {
    store_errors: bool,
    waited: bool,
    skipped: Option<i64>,
}

impl Reader {
    /// A caller that takes stored errors of any round when `store_errors`.
    pub fn new(store_errors: bool) -> Self {
        Self { store_errors, ..Self::default() }
    }

    /// The caller is about to wait for a round under way.
    pub fn waits(&mut self) {
        self.waited = true;
    }

    /// What the caller makes of `entry`, read now: taken, or (`None`) left, when it is an earlier round's error.
    pub fn take(&mut self, entry: Entry) -> Option<Entry> {
        if !entry.error || self.store_errors || (self.waited && self.skipped != Some(entry.fence)) {
            return Some(entry);
        }
        self.skipped = Some(entry.fence);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(error: bool, fence: i64) -> Entry {
        Entry { error, fence, payload: b"{\"a\":1}".to_vec() }
    }

    #[test]
    fn an_entry_round_trips_and_foreign_bytes_are_none() {
        for e in [entry(false, 1 << 52), entry(true, 7), Entry { error: false, fence: 3, payload: vec![] }] {
            assert_eq!(Entry::decode(e.encode()), Some(e));
        }
        assert_eq!(Entry::decode(b"x12345678".to_vec()), None);
        assert_eq!(Entry::decode(b"v1234".to_vec()), None);
        assert_eq!(Entry::decode(vec![]), None);
    }

    #[test]
    fn values_are_taken_and_errors_only_from_a_round_waited_for() {
        let mut fresh = Reader::new(false);
        assert!(fresh.take(entry(false, 5)).is_some());
        assert_eq!(fresh.take(entry(true, 5)), None, "an earlier round's error");
        fresh.waits();
        assert_eq!(fresh.take(entry(true, 5)), None, "still that round's, after waiting");
        assert!(fresh.take(entry(true, 6)).is_some(), "the error of the round it waited for");
        let mut stored = Reader::new(true);
        assert!(stored.take(entry(true, 5)).is_some());
    }
}
