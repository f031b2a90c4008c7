//! Whether the caller's thread has stalled: a lock is renewed only while the caller's event loop has turned within
//! `maxStall` (the caller beats at least that often while it turns). A loop stuck for good then frees its keys,
//! instead of renewing them for as long as the process lives.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The caller's beats, and how long without one counts as a stall.
#[derive(Debug)]
pub(crate) struct Stall {
    /// `None`: never stalled (`maxStall: Infinity`).
    max: Option<Duration>,
    base: Instant,
    /// When the caller last beat, in ms since `base` plus one; 0 before its first beat (then it never counts as
    /// stalled: a caller that does not beat, such as the core's own tests, is not watched).
    last: AtomicU64,
}

impl Stall {
    pub(crate) fn new(max: Option<Duration>) -> Self {
        Self { max, base: Instant::now(), last: AtomicU64::new(0) }
    }

    /// The caller's loop turned now.
    pub(crate) fn beat(&self) {
        self.beat_at(Instant::now());
    }

    /// Whether the caller's loop has not turned for longer than `maxStall`.
    pub(crate) fn stalled(&self) -> bool {
        self.stalled_at(Instant::now())
    }

    fn beat_at(&self, now: Instant) {
        self.last.store(self.ms(now) + 1, Ordering::Relaxed);
    }

    fn stalled_at(&self, now: Instant) -> bool {
        let (Some(max), last) = (self.max, self.last.load(Ordering::Relaxed)) else { return false };
        last != 0 && (self.ms(now) + 1).saturating_sub(last) > max.as_millis() as u64
    }

    fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_once_no_beat_came_within_max_stall() {
        let stall = Stall::new(Some(Duration::from_millis(100)));
        let at = |ms| stall.base + Duration::from_millis(ms);
        assert!(!stall.stalled_at(at(5000)), "not watched before its first beat");
        stall.beat_at(at(5000));
        assert!(!stall.stalled_at(at(5100)));
        assert!(stall.stalled_at(at(5101)));
        stall.beat_at(at(5101));
        assert!(!stall.stalled_at(at(5101)));
        let off = Stall::new(None);
        off.beat_at(at(0));
        assert!(!off.stalled_at(at(3_600_000)), "maxStall: Infinity");
    }
}
