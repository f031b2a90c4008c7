//! The rounds of shared results in this process (`locker.shared`): the callers of one key share one turn at a time.
//! The first caller's run takes the turn ([`crate::Locker::shared_turn`]); the others wait for what that **round**
//! comes to: its result, stored, or, when it stored none (its lease was lost, its turn timed out), a turn of their
//! own, the longest waiting first, within what is left of its `wait`.

use crate::config::LockOptions;
use rustc_hash::FxHashMap;
use snatch_protocol::shared::Entry;
use snatch_protocol::SnatchError;
use std::time::Instant;

/// A run of shared() waiting for its process's round of a key, or taking a turn.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) id: u32,
    /// Until when it waits.
    pub(crate) deadline: Instant,
    /// Its lock's options (its `wait` the whole wait).
    pub(crate) options: LockOptions,
    pub(crate) store_errors: bool,
}

/// What a round came to.
#[derive(Debug)]
pub(crate) enum RoundEnd {
    /// A result, stored (by this round, or found stored).
    Stored(Entry),
    /// No result: the runner's lease was lost, or its turn timed out.
    Nothing,
    /// The turn failed otherwise (Redis unreachable, say): its waiters fail so too.
    Failed(SnatchError),
}

/// What follows the end of a round, for its waiters.
#[derive(Debug, Default)]
pub(crate) struct AfterRound {
    /// The waiters that get the round's result.
    pub(crate) stored: Vec<u32>,
    /// The waiters that fail: the turn's error, or a timeout (their wait ran out).
    pub(crate) failed: Vec<(u32, SnatchError)>,
    /// The waiter that takes a turn of its own now, the others waiting for its round; its options' `wait` is what is
    /// left of its own.
    pub(crate) next: Option<(String, Caller)>,
}

/// The rounds under way, by key.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// Key → the run taking the turn, and the runs waiting, in order.
    by_key: FxHashMap<String, (u32, Vec<Caller>)>,
    /// Run taking a turn → its key.
    key_of: FxHashMap<u32, String>,
}

impl Rounds {
    /// `caller` joins the round of `key`: true when one is under way (it waits), false when it starts one (it takes
    /// the turn).
    pub(crate) fn join(&mut self, key: &str, caller: Caller) -> bool {
        if let Some((_, waiting)) = self.by_key.get_mut(key) {
            waiting.push(caller);
            return true;
        }
        self.key_of.insert(caller.id, key.to_owned());
        self.by_key.insert(key.to_owned(), (caller.id, Vec::new()));
        false
    }

    /// Waiter `id` waits no more (its wait ran out, or its caller stopped waiting): the key it waited for, and it;
    /// `None` when it was not waiting.
    pub(crate) fn leave(&mut self, id: u32) -> Option<(String, Caller)> {
        for (key, (_, waiting)) in &mut self.by_key {
            if let Some(at) = waiting.iter().position(|caller| caller.id == id) {
                return Some((key.clone(), waiting.remove(at)));
            }
        }
        None
    }

    /// The round whose turn run `id` took came to `end` (`now`): what its waiters get. `None` when `id` took no turn.
    pub(crate) fn ended(&mut self, id: u32, end: &RoundEnd, now: Instant) -> Option<AfterRound> {
        let key = self.key_of.remove(&id)?;
        let (_, waiting) = self.by_key.remove(&key)?;
        let mut after = AfterRound::default();
        match end {
            RoundEnd::Stored(_) => after.stored = waiting.into_iter().map(|caller| caller.id).collect(),
            RoundEnd::Failed(error) => {
                after.failed = waiting.into_iter().map(|caller| (caller.id, error.clone())).collect();
            }
            RoundEnd::Nothing => {
                let mut waiting = waiting.into_iter();
                for mut caller in waiting.by_ref() {
                    let left = caller.deadline.saturating_duration_since(now);
                    if left.is_zero() {
                        after.failed.push((caller.id, timed_out(&key, &caller)));
                        continue;
                    }
                    caller.options.wait = left;
                    self.key_of.insert(caller.id, key.clone());
                    self.by_key.insert(key.clone(), (caller.id, waiting.by_ref().collect()));
                    after.next = Some((key, caller));
                    break;
                }
            }
        }
        Some(after)
    }
}

/// The error of `caller`, whose wait for the shared result of `key` ran out.
pub(crate) fn timed_out(key: &str, caller: &Caller) -> SnatchError {
    SnatchError::Timeout { key: key.to_owned(), waited_ms: caller.options.wait.as_millis() as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn caller(id: u32, wait_ms: u64, now: Instant) -> Caller {
        let options = LockOptions { wait: Duration::from_millis(wait_ms), ..LockOptions::default() };
        Caller { id, deadline: now + options.wait, options, store_errors: false }
    }

    #[test]
    fn the_first_caller_takes_the_turn_and_the_others_get_its_stored_result() {
        let (mut rounds, now) = (Rounds::default(), Instant::now());
        assert!(!rounds.join("k", caller(1, 100, now)));
        assert!(rounds.join("k", caller(2, 100, now)));
        assert!(rounds.join("k", caller(3, 100, now)));
        let entry = Entry { error: false, fence: 7, payload: vec![] };
        let after = rounds.ended(1, &RoundEnd::Stored(entry), now).unwrap();
        assert_eq!(after.stored, [2, 3]);
        assert!(after.next.is_none() && after.failed.is_empty());
        assert!(!rounds.join("k", caller(4, 100, now)), "the round is over: a new one");
    }

    #[test]
    fn a_round_that_stored_nothing_passes_the_turn_to_the_next_waiter_still_within_its_wait() {
        let (mut rounds, now) = (Rounds::default(), Instant::now());
        rounds.join("k", caller(1, 100, now));
        rounds.join("k", caller(2, 10, now));
        rounds.join("k", caller(3, 100, now));
        rounds.join("k", caller(4, 100, now));
        let later = now + Duration::from_millis(40);
        let after = rounds.ended(1, &RoundEnd::Nothing, later).unwrap();
        assert_eq!(after.failed.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [2], "its wait ran out");
        let (key, next) = after.next.unwrap();
        assert_eq!((key.as_str(), next.id, next.options.wait), ("k", 3, Duration::from_millis(60)));
        let entry = Entry { error: true, fence: 8, payload: vec![] };
        assert_eq!(rounds.ended(3, &RoundEnd::Stored(entry), later).unwrap().stored, [4]);
    }

    #[test]
    fn a_failed_turn_fails_its_waiters_and_a_waiter_leaves_when_its_wait_ran_out() {
        let (mut rounds, now) = (Rounds::default(), Instant::now());
        rounds.join("k", caller(1, 100, now));
        rounds.join("k", caller(2, 100, now));
        rounds.join("k", caller(3, 100, now));
        assert_eq!(rounds.leave(2).map(|(key, caller)| (key, caller.id)), Some(("k".to_owned(), 2)));
        assert!(rounds.leave(2).is_none(), "once");
        let after = rounds.ended(1, &RoundEnd::Failed(SnatchError::Closed), now).unwrap();
        assert_eq!(after.failed, [(3, SnatchError::Closed)]);
        assert!(rounds.ended(1, &RoundEnd::Nothing, now).is_none(), "told once");
    }
}
