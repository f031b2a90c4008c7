//! One replica's loop of one schedule, without I/O: when its on-time occurrences start; when it renews its
//! registration (a heartbeat, every [`HEARTBEAT`] with jitter) and looks back at the ticks since its last look (those
//! nobody recorded are recorded missed and the latest runs late: [`CatchUp`], once their [`GRACE`] is over); when it
//! looks at the open attempts (a sweep: a dead runner's attempt, a due retry); the manual runs it takes and the
//! replaces it hears of. [`ScheduleLoop`] owns every timer, as quinn-proto's connection does: the driver (snatch-core's
//! scheduler) sleeps until [`ScheduleLoop::poll_timeout`], calls [`ScheduleLoop::handle_timeout`] then, feeds each
//! reply in ([`ScheduleLoop::registered`], [`ScheduleLoop::swept`], [`ScheduleLoop::trigger_taken`]) and does the
//! [`Act`]s they return. Each attempt it starts is an [`AttemptRun`](crate::attempt::AttemptRun) of its own.

use crate::attempt::{Next, Now, Start};
use crate::error::SnatchError;
use crate::schedule::{Attempt, CatchUp, Found, Jitter, Registered, Why, Write, MAX_LOOK_BACK};
use std::time::{Duration, Instant};

/// How often a replica renews its registrations and looks at its schedules' open attempts and manual runs.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// How often (in heartbeats) a registration also refreshes the schedule: its expression, and its keys' TTLs.
pub const REFRESH_EVERY: u32 = 12;

/// Occurrences younger than this are left to their on-time run (another replica's claim may be on its way), not run
/// late: beyond a little clock skew and latency.
pub const GRACE: Duration = Duration::from_secs(2);

/// Longest single wait for an occurrence, so that a wall-clock change is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// How long after an open attempt is due (or its claim would lapse) a replica looks at it: the server's expiry of a
/// key is exact to the millisecond.
pub const LOOK_SLACK: Duration = Duration::from_millis(20);

/// A heartbeat's share of [`HEARTBEAT`], from 0.9 to 1.1, so that the schedules of a replica do not renew at once.
const BEAT_JITTER: (f64, f64) = (0.9, 1.1);

/// When a schedule's occurrences are (in epoch ms): a cron expression in its time zone, for the core.
pub trait Ticks {
    /// The first tick strictly after `after`.
    fn next_after(&self, after: i64) -> Option<i64>;
    /// The last tick strictly before `before`.
    fn previous_before(&self, before: i64) -> Option<i64>;
}

/// What the loop takes of its schedule's options.
#[derive(Debug, Clone, Copy)]
pub struct LoopPolicy {
    /// An occurrence nobody ran at its tick runs late if it can start within this of its tick.
    pub starting_deadline: Duration,
    /// Further attempts after fn failed.
    pub retries: u32,
    /// When each occurrence starts after its tick.
    pub jitter: Jitter,
}

/// The ticks a registration looks at (see [`CatchUp`]) and the newest of them past its grace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookBack {
    pub ticks: Vec<i64>,
    pub settled: Option<i64>,
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Renew the registration, looking back at `look` (`refresh`: the expression and the keys' TTLs too); then
    /// [`ScheduleLoop::registered`].
    Register { look: LookBack, refresh: bool },
    /// Look at the open attempts; then [`ScheduleLoop::swept`].
    Sweep,
    /// Take the oldest manual run waiting; then [`ScheduleLoop::trigger_taken`].
    TakeTrigger,
    /// Run an attempt ([`AttemptRun`](crate::attempt::AttemptRun)).
    Start(Start),
    /// Write this record: an occurrence missed, or an attempt given up.
    Record(Box<Write>),
    /// The attempts running here of ticks before this give way: a later occurrence replaces them.
    GiveWay(i64),
}

/// Where the registration stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Beat {
    /// The next heartbeat is due then.
    At(Instant),
    /// A registration is under way; the next heartbeat is due at `next` (or earlier, as its reply says).
    Registering { next: Instant, first: bool },
}

/// A look at the open attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Idle,
    /// Due then.
    At(Instant),
    /// Under way; `again` once it is back, when a look was asked for meanwhile.
    Sweeping {
        again: Option<Instant>,
    },
}

/// One schedule's loop on this replica.
#[derive(Debug)]
pub struct ScheduleLoop<T> {
    ticks: T,
    policy: LoopPolicy,
    /// The next on-time tick, and when to look at the clock for it.
    next: Option<(i64, Instant)>,
    beat: Beat,
    sweep: Sweep,
    /// Manual runs are being taken.
    taking: bool,
    /// The ticks up to this were looked back at (none before the first heartbeat).
    looked: Option<i64>,
    /// The replace last heard of.
    replace: Option<i64>,
    /// Heartbeats so far.
    beats: u32,
    /// The first tick after a look back's start, while that start stays.
    first_after: Option<(i64, Option<i64>)>,
    /// Whether the schedule was suspended when last heard.
    suspended: bool,
    /// No new occurrence starts.
    stopped: bool,
    /// The state of the heartbeats' jitter (splitmix64).
    seed: u64,
}

impl<T: Ticks> ScheduleLoop<T> {
    /// The loop of a schedule whose occurrences `ticks` gives, started `now` (`seed`: any number, for the heartbeats'
    /// jitter). The first thing to do: register.
    pub fn new(ticks: T, policy: LoopPolicy, now: Now, seed: u64) -> (Self, Vec<Act>) {
        let mut machine = Self {
            ticks,
            policy,
            next: None,
            beat: Beat::At(now.instant),
            sweep: Sweep::Idle,
            taking: false,
            looked: None,
            replace: None,
            beats: 0,
            first_after: None,
            suspended: false,
            stopped: false,
            seed,
        };
        machine.next = machine.first_to_start(now);
        let acts = machine.handle_timeout(now);
        (machine, acts)
    }

    /// When the driver is to call [`ScheduleLoop::handle_timeout`]: the next tick, heartbeat or look, whichever comes
    /// first; `None` once stopped or out of ticks, and nothing is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let beat = match self.beat {
            Beat::At(at) => Some(at),
            Beat::Registering { .. } => None,
        };
        let sweep = match self.sweep {
            Sweep::At(at) => Some(at),
            _ => None,
        };
        let tick = self.next.filter(|_| !self.stopped).map(|(_, at)| at);
        [tick, beat, sweep].into_iter().flatten().min()
    }

    /// What is due `now`: an on-time occurrence, a heartbeat, a look at the open attempts.
    pub fn handle_timeout(&mut self, now: Now) -> Vec<Act> {
        let mut acts = Vec::new();
        if let Some((tick, at)) = self.next.filter(|_| !self.stopped) {
            if now.instant >= at {
                let jitter = self.policy.jitter;
                if now.wall_ms >= jitter.start(tick) {
                    let start = Start { attempt: Attempt::first(tick), why: Why::OnTime, follows: None };
                    acts.push(Act::Start(start));
                    // The next tick, in order (with a jitter above the period, a later tick's start may come first: it
                    // starts at once then); ticks whose start passed beyond the jitter (a long sleep) are left to the
                    // look back.
                    let after = tick.max(now.wall_ms.saturating_sub(jitter.max().as_millis() as i64));
                    self.next = self.ticks.next_after(after).map(|next| (next, wake_for(jitter.start(next), now)));
                } else {
                    // Woken early (the longest wait, or the wall clock moved): wait again.
                    self.next = Some((tick, wake_for(jitter.start(tick), now)));
                }
            }
        }
        if matches!(self.beat, Beat::At(at) if now.instant >= at) {
            acts.extend(self.heartbeat(now));
        }
        if matches!(self.sweep, Sweep::At(at) if now.instant >= at) {
            self.sweep = Sweep::Sweeping { again: None };
            acts.push(Act::Sweep);
        }
        acts
    }

    /// The schedule's control channel spoke (a suspend, resume, trigger, replace or hand-over): a heartbeat now,
    /// unless one is under way.
    pub fn heard(&mut self, now: Now) -> Vec<Act> {
        match self.beat {
            Beat::At(_) => self.heartbeat(now),
            Beat::Registering { .. } => vec![],
        }
    }

    /// A look at the open attempts is due at `at`: a retry's time, or when a claim of another replica's would lapse.
    pub fn look_at(&mut self, at: Instant) {
        self.sweep = match self.sweep {
            Sweep::Idle => Sweep::At(at),
            Sweep::At(due) => Sweep::At(due.min(at)),
            Sweep::Sweeping { again } => Sweep::Sweeping { again: Some(again.map_or(at, |a| a.min(at))) },
        };
    }

    /// The registration came to `registered`: what it says is done (suspension, a replace, manual runs, open
    /// attempts due, the occurrences nobody recorded), and the next heartbeat armed.
    pub fn registered(&mut self, registered: Result<Registered, SnatchError>, look: &LookBack, now: Now) -> Vec<Act> {
        let Beat::Registering { next, first } = self.beat else { return vec![] };
        let Ok(state) = registered else {
            self.beat = Beat::At(next);
            return vec![];
        };
        if first && self.looked.is_none() && look.ticks.is_empty() {
            // Now that it is known since when, the first look back (a second registration, when it finds ticks).
            let first_look = self.look_back(state.last.unwrap_or(i64::MIN).max(state.since), now);
            if !first_look.ticks.is_empty() {
                return vec![Act::Register { look: first_look, refresh: false }];
            }
        }
        let mut acts = Vec::new();
        let settled = look.settled.unwrap_or(i64::MIN);
        self.looked = Some(state.last.unwrap_or(i64::MIN).max(state.since).max(settled));
        self.suspended = state.suspended;
        // A replace asked for before this replica started concerns attempts of others.
        if !first && state.replace > self.replace {
            acts.extend(state.replace.map(Act::GiveWay));
        }
        self.replace = state.replace;
        if state.triggers > 0 && !self.taking {
            self.taking = true;
            acts.push(Act::TakeTrigger);
        }
        if state.due > 0 {
            self.look_at(now.instant);
        }
        // The next open attempt is looked at when it is due (its lease over, its retry due), not at a later beat.
        if let Some(due_in) = state.due_in.and_then(|ms| u64::try_from(ms).ok()) {
            self.look_at(now.instant + Duration::from_millis(due_in) + LOOK_SLACK);
        }
        acts.extend(self.catch_up(look, &state, now));
        // An occurrence nobody recorded yet is looked at again once its grace is over.
        let unsettled = look.ticks.iter().zip(&state.recorded).find(|&(&tick, &recorded)| tick > settled && !recorded);
        let again = unsettled.and_then(|(&tick, _)| {
            let wait = self.policy.jitter.start(tick) + GRACE.as_millis() as i64 + 50 - now.wall_ms;
            Some(now.instant + Duration::from_millis(u64::try_from(wait).ok()?))
        });
        self.beat = Beat::At(again.map_or(next, |again| again.min(next)));
        acts.extend(self.handle_timeout(now));
        acts
    }

    /// A look at the open attempts came to `swept`: each that needs another gets it (or is given up), and a running
    /// one's claim is looked at again when it would lapse (`again`), should its runner have died.
    pub fn swept(&mut self, swept: Result<(Vec<Found>, Option<Duration>), SnatchError>, now: Now) -> Vec<Act> {
        let Sweep::Sweeping { again } = self.sweep else { return vec![] };
        self.sweep = again.map_or(Sweep::Idle, Sweep::At);
        let (found, lapses) = swept.unwrap_or_default();
        if let Some(lapses) = lapses {
            self.look_at(now.instant + lapses + LOOK_SLACK);
        }
        found
            .into_iter()
            .map(|found| match Next::after(&found, self.policy.retries) {
                Next::Attempt(attempt) => Act::Start(Start { attempt, why: Why::Retry, follows: Some(found) }),
                Next::GiveUp(write) => Act::Record(write),
            })
            .collect()
    }

    /// Taking a manual run came to `taken`: it runs here, and the next is taken, until none is left.
    pub fn trigger_taken(&mut self, taken: Result<Option<i64>, SnatchError>) -> Vec<Act> {
        match taken {
            Ok(Some(tick)) => {
                let attempt = Attempt { tick, manual: true, attempt: 1 };
                vec![Act::Start(Start { attempt, why: Why::Manual, follows: None }), Act::TakeTrigger]
            }
            _ => {
                self.taking = false;
                vec![]
            }
        }
    }

    /// Whether the schedule was suspended when last heard.
    pub fn suspended(&self) -> bool {
        self.suspended
    }

    /// No new on-time occurrence starts (the driver then waits for its attempts and leaves).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether no occurrence is left to start: stopped, or the schedule has no tick after now.
    pub fn is_over(&self) -> bool {
        self.stopped || self.next.is_none()
    }

    /// Starts a heartbeat `now`: the registration, with a look back at the ticks since the last look when one came.
    fn heartbeat(&mut self, now: Now) -> Vec<Act> {
        let next = now.instant + HEARTBEAT.mul_f64(self.jitter());
        let look = match self.looked.filter(|&from| self.ticked_since(from, now)) {
            Some(from) => self.look_back(from, now),
            _ => LookBack::default(),
        };
        let refresh = self.beats.is_multiple_of(REFRESH_EVERY);
        self.beats += 1;
        self.beat = Beat::Registering { next, first: self.looked.is_none() };
        vec![Act::Register { look, refresh }]
    }

    /// The occurrences the look back found that nobody ran recorded missed, and the latest run late when no later
    /// one ran and it can still start within `startingDeadline` (see [`CatchUp`]). Not the ticks from before the
    /// schedule's registration: with a state that is gone (Redis restarted empty, or everything expired) their
    /// records are gone too, and what ran then is not known.
    fn catch_up(&self, look: &LookBack, state: &Registered, now: Now) -> Vec<Act> {
        let ticks: Vec<(i64, bool)> = look
            .ticks
            .iter()
            .copied()
            .zip(state.recorded.iter().copied())
            .filter(|&(tick, _)| tick > state.since)
            .collect();
        let plan = CatchUp::plan(&ticks, now.wall_ms, GRACE, self.policy.starting_deadline, self.policy.jitter);
        let missed = plan
            .missed
            .into_iter()
            .map(|(tick, reason)| Act::Record(Box::new(Write::missed(Attempt::first(tick), Why::OnTime, reason))));
        let late =
            plan.late.map(|tick| Act::Start(Start { attempt: Attempt::first(tick), why: Why::Late, follows: None }));
        missed.chain(late).collect()
    }

    /// Whether a tick came after `from` up to `now`.
    fn ticked_since(&mut self, from: i64, now: Now) -> bool {
        let first = match self.first_after {
            Some((after, first)) if after == from => first,
            _ => {
                let first = self.ticks.next_after(from);
                self.first_after = Some((from, first));
                first
            }
        };
        first.is_some_and(|tick| tick <= now.wall_ms)
    }

    /// The ticks after `from` up to `now` (the newest [`MAX_LOOK_BACK`] of them), and the newest of them past its
    /// grace.
    fn look_back(&self, from: i64, now: Now) -> LookBack {
        let mut ticks = Vec::new();
        let mut before = now.wall_ms + 1;
        while let Some(tick) = self.ticks.previous_before(before).filter(|&tick| tick > from) {
            ticks.push(tick);
            if ticks.len() == MAX_LOOK_BACK {
                break;
            }
            before = tick;
        }
        ticks.reverse();
        let settled_before = now.wall_ms - GRACE.as_millis() as i64;
        let settled = ticks.iter().copied().filter(|&tick| self.policy.jitter.start(tick) <= settled_before).max();
        LookBack { ticks, settled }
    }

    /// The first tick to start on time when the loop starts `now`, and when to look at the clock for it: the first
    /// whose start (with its jitter) is still ahead; those whose start passed are left to the look back.
    fn first_to_start(&self, now: Now) -> Option<(i64, Instant)> {
        let jitter = self.policy.jitter;
        let mut tick = self.ticks.next_after(now.wall_ms.saturating_sub(jitter.max().as_millis() as i64))?;
        while tick <= now.wall_ms && jitter.start(tick) <= now.wall_ms {
            tick = self.ticks.next_after(tick)?;
        }
        Some((tick, wake_for(jitter.start(tick), now)))
    }

    /// The next heartbeat's share of [`HEARTBEAT`].
    fn jitter(&mut self) -> f64 {
        self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let unit = (z ^ (z >> 31)) as f64 / u64::MAX as f64;
        BEAT_JITTER.0 + unit * (BEAT_JITTER.1 - BEAT_JITTER.0)
    }
}

/// When to look at the clock for `tick`, seen `now`: at the tick, or after the longest wait.
fn wake_for(tick: i64, now: Now) -> Instant {
    let until = Duration::from_millis(u64::try_from(tick - now.wall_ms).unwrap_or(0));
    now.instant + until.min(MAX_SLEEP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Record, Status};

    /// A tick every so many ms.
    struct Every(i64);

    impl Ticks for Every {
        fn next_after(&self, after: i64) -> Option<i64> {
            Some((after.div_euclid(self.0) + 1) * self.0)
        }
        fn previous_before(&self, before: i64) -> Option<i64> {
            Some((before - 1).div_euclid(self.0) * self.0)
        }
    }

    const EVERY_SECOND: Every = Every(1000);

    const POLICY: LoopPolicy =
        LoopPolicy { starting_deadline: Duration::from_secs(60), retries: 0, jitter: Jitter::NONE };

    fn at(wall_ms: i64) -> Now {
        thread_local! { static START: Instant = Instant::now(); }
        let instant = START.with(|start| *start + Duration::from_millis(u64::try_from(wall_ms - 10_000).unwrap()));
        Now { wall_ms, instant }
    }

    fn registered(since: i64, recorded: Vec<bool>) -> Registered {
        Registered {
            now: 0,
            since,
            last: None,
            suspended: false,
            due: 0,
            triggers: 0,
            replace: None,
            due_in: None,
            recorded,
        }
    }

    /// A loop started at 10.5 s and registered (first registered at `since`).
    fn started(since: i64) -> ScheduleLoop<Every> {
        let (mut machine, acts) = ScheduleLoop::new(EVERY_SECOND, POLICY, at(10_500), 7);
        assert_eq!(acts, vec![Act::Register { look: LookBack::default(), refresh: true }]);
        let look = LookBack::default();
        machine.registered(Ok(registered(since, vec![])), &look, at(10_510));
        machine
    }

    #[test]
    fn each_tick_starts_an_on_time_attempt_when_the_clock_reaches_it() {
        let mut machine = started(10_000);
        assert_eq!(machine.poll_timeout(), Some(at(11_000).instant), "the tick comes before the heartbeat");
        assert_eq!(machine.handle_timeout(at(10_999)), vec![]);
        let start = Start { attempt: Attempt::first(11_000), why: Why::OnTime, follows: None };
        assert_eq!(machine.handle_timeout(at(11_000)), vec![Act::Start(start)]);
        assert_eq!(machine.poll_timeout(), Some(at(12_000).instant));
        machine.stop();
        assert!(machine.is_over());
        assert!(machine.poll_timeout().is_some_and(|t| t > at(12_000).instant), "only the heartbeat is left");
    }

    #[test]
    fn with_jitter_each_on_time_occurrence_starts_at_its_tick_plus_its_offset_and_stays_its_tick() {
        let jitter = Jitter::new("digest", Duration::from_millis(800));
        let policy = LoopPolicy { jitter, ..POLICY };
        let (mut machine, _) = ScheduleLoop::new(EVERY_SECOND, policy, at(10_000 + jitter.offset(10_000) + 1), 7);
        machine.registered(Ok(registered(10_000, vec![])), &LookBack::default(), at(10_999));
        for tick in [11_000, 12_000, 13_000] {
            let start = jitter.start(tick);
            assert_eq!(machine.poll_timeout(), Some(at(start).instant), "tick {tick}");
            assert!(machine.handle_timeout(at(start - 1)).iter().all(|act| !matches!(act, Act::Start(_))));
            let acts = machine.handle_timeout(at(start));
            let on_time = Start { attempt: Attempt::first(tick), why: Why::OnTime, follows: None };
            assert!(acts.contains(&Act::Start(on_time)), "{acts:?}");
            machine.beat = Beat::At(at(100_000).instant);
        }
    }

    #[test]
    fn with_a_jitter_above_the_period_ticks_start_in_order() {
        let jitter = Jitter::new("often", Duration::from_millis(5_000));
        let policy = LoopPolicy { jitter, ..POLICY };
        let (mut machine, _) = ScheduleLoop::new(EVERY_SECOND, policy, at(10_500), 7);
        machine.beat = Beat::At(at(1_000_000).instant);
        let mut started = Vec::new();
        let mut now = at(10_500);
        while started.len() < 20 {
            now = at(now.wall_ms + 10);
            for act in machine.handle_timeout(now) {
                if let Act::Start(start) = act {
                    assert!(now.wall_ms >= jitter.start(start.attempt.tick), "not before its start");
                    started.push(start.attempt.tick);
                }
            }
        }
        let first = started[0];
        assert!(first > 10_500 || jitter.start(first) > 10_500, "one whose start passed is the look back's");
        assert_eq!(started, (0..20).map(|n| first + n * 1000).collect::<Vec<_>>(), "each tick, once, in order");
    }

    #[test]
    fn a_heartbeat_every_five_seconds_with_jitter_refreshing_every_twelfth() {
        let mut machine = started(10_000);
        machine.stop();
        let mut refreshes = 0;
        let mut now = at(10_510);
        for _ in 0..24 {
            let due = machine.poll_timeout().unwrap();
            let waited = due - now.instant;
            assert!(waited >= HEARTBEAT.mul_f64(0.9) && waited <= HEARTBEAT.mul_f64(1.1), "{waited:?}");
            now = Now { wall_ms: now.wall_ms + waited.as_millis() as i64, instant: due };
            let acts = machine.handle_timeout(now);
            let [Act::Register { refresh, .. }] = acts.as_slice() else { panic!("{acts:?}") };
            refreshes += u32::from(*refresh);
            assert_eq!(machine.poll_timeout(), None, "no heartbeat while one is under way");
            machine.registered(Ok(registered(10_000, vec![])), &LookBack::default(), now);
        }
        assert_eq!(refreshes, 2);
    }

    #[test]
    fn the_first_look_back_runs_the_latest_missed_occurrence_late_and_records_the_rest() {
        let (mut machine, _) = ScheduleLoop::new(EVERY_SECOND, POLICY, at(10_500), 7);
        // Registered since 6.5 s: the ticks 7, 8, 9 and 10 s passed; 9 s and 10 s ran? Only 8 s did.
        let mut state = registered(6_500, vec![]);
        state.last = None;
        let acts = machine.registered(Ok(state), &LookBack::default(), at(10_510));
        let look = LookBack { ticks: vec![7_000, 8_000, 9_000, 10_000], settled: Some(8_000) };
        assert_eq!(acts, vec![Act::Register { look: look.clone(), refresh: false }]);
        let acts = machine.registered(Ok(registered(6_500, vec![false, true, false, false])), &look, at(10_520));
        let missed = Write::missed(Attempt::first(7_000), Why::OnTime, "superseded");
        assert_eq!(acts, vec![Act::Record(Box::new(missed))], "9 s and 10 s are within their grace");
        // Looked at again once 9 s's grace is over.
        assert_eq!(machine.poll_timeout(), Some(at(11_000).instant));
        machine.handle_timeout(at(11_000));
        assert_eq!(machine.poll_timeout(), Some(at(11_050).instant));
        let acts = machine.handle_timeout(at(11_050));
        let look = LookBack { ticks: vec![9_000, 10_000, 11_000], settled: Some(9_000) };
        assert_eq!(acts, vec![Act::Register { look: look.clone(), refresh: false }]);
        let acts = machine.registered(Ok(registered(6_500, vec![false, false, true])), &look, at(11_060));
        let missed = Write::missed(Attempt::first(9_000), Why::OnTime, "superseded");
        assert_eq!(acts, vec![Act::Record(Box::new(missed))], "a later occurrence ran");
    }

    #[test]
    fn a_missed_newest_occurrence_runs_late_within_the_deadline_and_is_recorded_missed_past_it() {
        let policy = LoopPolicy { starting_deadline: Duration::from_secs(3), ..POLICY };
        for (now, want) in [(32_500, None), (35_000, Some("deadline"))] {
            let (mut machine, _) = ScheduleLoop::new(Every(10_000), policy, at(now), 7);
            let acts = machine.registered(Ok(registered(12_000, vec![])), &LookBack::default(), at(now));
            let [Act::Register { look, .. }] = acts.as_slice() else { panic!("{acts:?}") };
            assert_eq!(look.ticks.first(), Some(&20_000));
            let mut recorded = vec![false; look.ticks.len()];
            recorded[0] = true;
            let acts = machine.registered(Ok(registered(12_000, recorded)), &look.clone(), at(now));
            let latest = *look.ticks.last().unwrap();
            match want {
                None => {
                    let late = Start { attempt: Attempt::first(latest), why: Why::Late, follows: None };
                    assert_eq!(acts, vec![Act::Start(late)]);
                }
                Some(reason) => {
                    let missed = Write::missed(Attempt::first(latest), Why::OnTime, reason);
                    assert_eq!(acts.last(), Some(&Act::Record(Box::new(missed))), "{acts:?}");
                    assert!(!acts.iter().any(|act| matches!(act, Act::Start(_))));
                }
            }
        }
    }

    #[test]
    fn open_attempts_are_looked_at_when_due_once_at_a_time_and_taken_over() {
        let mut machine = started(10_000);
        machine.look_at(at(10_700).instant);
        machine.look_at(at(10_600).instant);
        assert_eq!(machine.poll_timeout(), Some(at(10_600).instant));
        assert_eq!(machine.handle_timeout(at(10_600)), vec![Act::Sweep]);
        machine.look_at(at(10_650).instant);
        assert_eq!(machine.handle_timeout(at(10_650)), vec![], "one look at a time");
        let record = Record { outcome: Status::Running, ..Record::missed(Attempt::first(9_000), Why::OnTime, "") };
        let found = Found { json: record.to_json(), record };
        let acts = machine.swept(Ok((vec![found.clone()], Some(Duration::from_secs(3)))), at(10_700));
        let start = Start { attempt: Attempt::first(9_000).next(), why: Why::Retry, follows: Some(found) };
        assert_eq!(acts, vec![Act::Start(start)]);
        assert_eq!(machine.poll_timeout(), Some(at(10_650).instant), "the look asked for meanwhile");
    }

    #[test]
    fn manual_runs_are_taken_until_none_is_left_and_a_replace_is_heard_after_the_first_heartbeat() {
        let mut machine = started(10_000);
        let mut state = registered(10_000, vec![]);
        state.triggers = 2;
        state.replace = Some(9_000);
        let now = at(15_000);
        assert!(matches!(machine.heard(now).as_slice(), [Act::Register { .. }]), "the control channel spoke");
        let acts = machine.registered(Ok(state), &LookBack::default(), now);
        assert!(acts.contains(&Act::GiveWay(9_000)) && acts.contains(&Act::TakeTrigger), "{acts:?}");
        let acts = machine.trigger_taken(Ok(Some(14_000)));
        let manual = Attempt { tick: 14_000, manual: true, attempt: 1 };
        assert_eq!(
            acts,
            vec![Act::Start(Start { attempt: manual, why: Why::Manual, follows: None }), Act::TakeTrigger]
        );
        assert_eq!(machine.trigger_taken(Ok(None)), vec![]);
    }
}
