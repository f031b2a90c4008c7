//! Why direct acquisitions need no transaction (acquisition.rs, `COMMANDS`), checked against a model: lockers send
//! `SET key token NX PX ttl` and then `INCR counter` as separate commands, which Redis runs with any other locker's
//! commands in between and at any later time; a locker uses an acquisition only if its reply comes before the lease's
//! validity (ttl minus the drift allowance) ends, counted from when it sent the commands, and gives it back otherwise.
//! Whatever the interleaving and the delays, the acquisitions used get fences that rise in the order they took the
//! key. Time is one clock here (no clock of Redis's jumping ahead: docs/SAFETY.md says what that would change).

use proptest::prelude::*;

/// The drift allowance, in ms: validity ends this long before the key's TTL does.
const DRIFT_MS: u64 = 1;

/// Where a locker's acquisition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing under way.
    Idle,
    /// Commands sent at `sent`; Redis has not run the `SET` yet.
    Sent { sent: u64 },
    /// Redis ran the `SET` (`took`: it took the key, as the `took`-th taking of it).
    Set { sent: u64, took: Option<usize> },
    /// Redis ran the `INCR` too: the reply is on its way.
    Counted { sent: u64, took: Option<usize>, fence: u64 },
    /// The key is ours (used or to give back): the next step releases it.
    Holding,
}

/// One step of a run: time passes, or a locker's next action happens (Redis running its next command, or the
/// locker reading its reply or releasing).
#[derive(Debug, Clone, Copy)]
enum Step {
    Wait(u8),
    Act(usize),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![(0..6u8).prop_map(Step::Wait), (0..4usize).prop_map(Step::Act)];
    prop::collection::vec(step, 0..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]

    #[test]
    fn fences_of_the_acquisitions_used_rise_in_the_order_they_took_the_key(
        ttls in prop::collection::vec(2..12u64, 4),
        steps in steps(),
    ) {
        let mut now = 0u64;
        // The key: its holder (a locker) and when it expires; the counter.
        let mut key: Option<(usize, u64)> = None;
        let mut counter = 0u64;
        let mut takings = 0usize;
        let mut phases = [Phase::Idle; 4];
        // For each acquisition used: the how-manieth taking of the key it was, and its fence.
        let mut used: Vec<(usize, u64)> = Vec::new();
        for step in steps {
            let locker = match step {
                Step::Wait(ms) => {
                    now += u64::from(ms);
                    continue;
                }
                Step::Act(locker) => locker,
            };
            if key.is_some_and(|(_, expires)| expires <= now) {
                key = None;
            }
            let ttl = ttls[locker];
            phases[locker] = match phases[locker] {
                Phase::Idle => Phase::Sent { sent: now },
                Phase::Sent { sent } => {
                    let took = key.is_none().then(|| {
                        key = Some((locker, now + ttl));
                        takings += 1;
                        takings
                    });
                    Phase::Set { sent, took }
                }
                Phase::Set { sent, took } => {
                    counter += 1;
                    Phase::Counted { sent, took, fence: counter }
                }
                Phase::Counted { sent, took: Some(took), fence } => {
                    if now < sent + ttl - DRIFT_MS {
                        used.push((took, fence));
                    }
                    Phase::Holding
                }
                Phase::Counted { took: None, .. } => Phase::Idle,
                Phase::Holding => {
                    if key.is_some_and(|(holder, _)| holder == locker) {
                        key = None;
                    }
                    Phase::Idle
                }
            };
        }
        used.sort_unstable();
        for pair in used.windows(2) {
            prop_assert!(pair[0].1 < pair[1].1, "taken later, fenced lower: {:?}", used);
        }
    }
}
