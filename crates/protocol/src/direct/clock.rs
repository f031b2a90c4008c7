//! The server's clock as a socket of direct calls knows it, to start a new fence counter without a script.
//!
//! A fence counter that does not exist (a key locked for the first time, or not for `fenceTtl`) must start above
//! every fence the key ever had. The acquire script starts it from the server clock (`TIME`, scripts/fence.lua). A
//! transaction cannot read the clock, so a direct transaction for a counter not counted up lately (recent.rs) first sends
//! [`Floor`]'s command, `SET fence <floor> NX PXAT <until>`: a counter that does not exist starts at `floor`, a value
//! of the server clock the socket knows to have passed, and `until` makes the server itself refuse a floor too old to
//! be safe. Why it holds:
//!
//! - Every fence a counter gives is at most the server clock's µs when it gives it (a counter starts from that clock,
//!   by either path, and goes up by one per acquisition: it would take over a million acquisitions of one key per
//!   second to pass it). This is the condition the acquire script's floor already rests on.
//! - A counter that no longer exists was last kept at least `fenceTtl` ago by the server's clock (each acquisition
//!   keeps it `fenceTtl` from then, and only its expiry removes it, as long as Redis keeps its data): every fence it
//!   gave is below `now - fenceTtl`, plus the millisecond of rounding.
//! - `until` is `floor`'s millisecond plus `fenceTtl - 1` ms. Redis does not keep a key set with an expiry that has
//!   passed (it answers OK and the key does not exist), so the counter starts at `floor` only when
//!   `now < until`, that is when `floor > now - fenceTtl + 1 ms`: above every fence the key had. Otherwise the
//!   counter starts from 0, below [`crate::keys::CLOCK_FLOOR`], and the acquisition goes again by the acquire script
//!   ([`crate::acquisition::Acquired::NewCounter`]), as it would without a floor.
//! - `floor` is at most the server clock when the command runs, so later floors (the script's or another socket's)
//!   stay above it in turn: it is what the server said (`CLOCK`, read when the socket opened), plus the time since on
//!   this process's monotonic clock, counted [`DRIFT`] slow. That holds while the two clocks run within 0.1% of each
//!   other's rate (NTP slews a clock by at most 0.05%) and the server's clock does not step back, the condition the
//!   script's floor rests on too.
//!
//! So the socket's reading of the clock decides only how often a new counter needs the script: never, while the
//! reading lags the server by less than `fenceTtl`; every time, once it lags by more (then [`ServerClock::floor`]
//! gives none, and a lock whose counter was not counted up lately goes by the script at once).

use crate::acquisition::Floor;
use std::time::{Duration, Instant};

/// How much slower than this process's monotonic clock the server's clock is assumed to run, at most: 1/1000.
pub const DRIFT: u32 = 1000;

/// The server's clock, as read when a socket opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerClock {
    /// The server clock's µs, read between `sent` and `read`.
    micros: i64,
    /// When the command that read it was written.
    sent: Instant,
    /// When its reply was in.
    read: Instant,
}

impl ServerClock {
    /// The server clock said `micros`, read by a command written at `sent` whose reply was in at `read`.
    pub fn new(micros: i64, sent: Instant, read: Instant) -> Self {
        Self { micros, sent, read }
    }

    /// The server clock's µs at `now`, at least: what it said, plus the time since its reply, counted [`DRIFT`] slow.
    pub fn at_least(&self, now: Instant) -> i64 {
        let since = micros(now.saturating_duration_since(self.read));
        self.micros.saturating_add(since - since / i64::from(DRIFT))
    }

    /// How far behind the server clock [`at_least`](Self::at_least) may be at `now`: the time the reading took, and
    /// the drift since in either direction.
    pub fn lag(&self, now: Instant) -> Duration {
        let took = self.read.saturating_duration_since(self.sent);
        took + now.saturating_duration_since(self.read) * 2 / DRIFT
    }

    /// The floor of a new counter kept `fence_ttl_ms`, for a command written at `now`; `None` when the reading may lag
    /// the server by so much that Redis would refuse the floor anyway (and a new key goes by the script at once).
    pub fn floor(&self, now: Instant, fence_ttl_ms: u128) -> Option<Floor> {
        let window = i64::try_from(fence_ttl_ms).ok()?.checked_sub(1)?;
        let lag = i64::try_from(self.lag(now).as_millis()).ok()?;
        if lag.saturating_add(1) >= window {
            return None;
        }
        let fence = self.at_least(now);
        Some(Floor { fence, until_ms: (fence / 1000).checked_add(window)? })
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAID: i64 = 1_800_000_000_000_000;

    #[test]
    fn the_floor_is_what_the_server_said_plus_the_time_since_counted_slow() {
        let sent = Instant::now();
        let read = sent + Duration::from_millis(2);
        let clock = ServerClock::new(SAID, sent, read);
        assert_eq!(clock.at_least(read), SAID);
        assert_eq!(clock.at_least(read + Duration::from_secs(10)), SAID + 10_000_000 - 10_000);
        let floor = clock.floor(read + Duration::from_secs(10), 60_000).unwrap();
        assert_eq!(floor, Floor { fence: SAID + 9_990_000, until_ms: (SAID + 9_990_000) / 1000 + 59_999 });
    }

    /// A model of one key's fence counter on a server whose clock moves on: acquisitions at random times, each
    /// starting a counter that does not exist by the acquire script (from the clock) or by a floor from a reading of
    /// the clock lagging by any amount (refused by Redis once `until` has passed, then by the script); each counts it
    /// up and keeps it `fenceTtl`. Every fence must be above every fence before it.
    #[test]
    fn fences_only_rise_whatever_the_floors_lag_and_the_counters_ttl() {
        use proptest::prelude::*;
        // Gaps and lags of any size, and ones right at the counter's ttl, where a wrong `until` would show.
        let gap = prop_oneof![0i64..20_000_000, -3_000i64..3_000];
        let lag = prop_oneof![0i64..30_000_000, -3_000i64..3_000];
        let steps = prop::collection::vec((gap, lag, any::<bool>(), any::<bool>()), 1..60);
        proptest!(|(fence_ttl_ms in prop_oneof![1u64..50, 1u64..10_000], steps in steps)| {
            let ttl_us = fence_ttl_ms as i64 * 1000;
            let mut now_us: i64 = SAID;
            // The counter: its value and when it expires (server ms); the last fence given.
            let mut counter: Option<(i64, i64)> = None;
            let mut last = i64::MIN;
            for (gap_us, lag_us, near_ttl, scripted) in steps {
                // A small gap or lag is taken as one near the ttl.
                let near = |d: i64| if d.abs() < 3_000 && near_ttl { (ttl_us + d).max(0) } else { d.max(0) };
                let (gap_us, lag_us) = (near(gap_us), near(lag_us));
                now_us += gap_us + 1;
                let now_ms = now_us / 1000;
                counter = counter.filter(|&(_, expires)| now_ms < expires);
                if counter.is_none() && !scripted {
                    let read = Instant::now();
                    let floor = ServerClock::new(now_us - lag_us, read, read).floor(read, u128::from(fence_ttl_ms));
                    // SET fence floor NX PXAT until: kept only while its expiry is to come.
                    counter = floor.filter(|f| now_ms < f.until_ms).map(|f| (f.fence, f.until_ms));
                }
                let value = match counter {
                    Some((value, _)) => value + 1,
                    // From 0 (a refused floor, or none): the acquire script raises it to the clock.
                    None => 1i64.max(now_us),
                };
                counter = Some((value, now_ms + fence_ttl_ms as i64));
                prop_assert!(value > last, "fence {} after {}", value, last);
                prop_assert!(value <= now_us + 1, "a fence is at most the clock");
                last = value;
            }
        });
    }

    #[test]
    fn no_floor_once_the_reading_may_lag_by_the_counters_ttl() {
        let sent = Instant::now();
        let clock = ServerClock::new(SAID, sent, sent + Duration::from_millis(3));
        assert!(clock.floor(sent, 1).is_none(), "a 1 ms fenceTtl leaves no room");
        assert!(clock.floor(sent, 5).is_none(), "the reading took 3 ms");
        assert!(clock.floor(sent + Duration::from_millis(3), 6).is_some());
        // The drift bound grows with the reading's age: 2 ms per second.
        let later = sent + Duration::from_secs(3600);
        assert_eq!(clock.lag(later), Duration::from_millis(3) + Duration::from_micros(7_199_994));
        assert!(clock.floor(later, 7_000).is_none());
        assert!(clock.floor(later, 12_000).is_some());
        assert!(clock.floor(later, u128::MAX).is_none(), "a ttl out of range");
    }
}
