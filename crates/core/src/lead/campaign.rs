//! A replica's campaign for leadership of a name (`locker.lead`): it waits for the name's lock up to `retry` at a time
//! (woken when the leader releases it), and while it holds the lock its fn runs through the runner as a run of the one
//! lifecycle, a **term** whose number is the lock's fence. A term ends when fn settles, its lease is lost, or the
//! leader resigns or stops (fn's signal then aborts); how it ended is decided here ([`Revoked::of`]). The campaign
//! notes each term's beginning and end for the observers, and after a term (or an error) waits `retry` before it
//! campaigns again, so that another replica can take over.

use crate::config::{validate_duration, LockOptions};
use crate::lead::leading;
use crate::lock::job::Job;
use crate::lock::lease::Lease;
use crate::lock::locker::Locker;
use crate::run::hold::FnSettled;
use crate::run::input::{post_or_undo, Input, Post};
use snatch_protocol::attempt::AbortReason;
use snatch_protocol::lead::{LeaderKeys, Revoked};
use snatch_protocol::run::Outcome;
use snatch_protocol::SnatchError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The default `retry` of a campaign: how long it waits for the lock at a time, and pauses after a term.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// Options of a campaign.
#[derive(Debug, Clone)]
pub struct CampaignOptions {
    /// The lease of a term (renewed while fn runs); `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// How long it waits for the lock at a time, and pauses after a term or an error.
    pub retry: Duration,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        Self { ttl: None, retry: DEFAULT_RETRY }
    }
}

/// A campaign under way.
#[derive(Clone)]
pub struct Campaign {
    job: Job,
    resign: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl Campaign {
    /// Ends the term under way, if any (its fn's signal aborts, and the lock is given back once fn settled): resolves
    /// then. It campaigns again after `retry`.
    pub async fn resign(&self) {
        let (done, ended) = oneshot::channel();
        if self.resign.send(done).is_ok() {
            let _ = ended.await;
        }
    }

    /// Ends the term under way, if any, and campaigns no more: resolves once the campaign stopped. Idempotent.
    pub async fn stop(&self) {
        self.job.stop().await;
    }
}

/// Starts campaign `id` (the caller's id for it) of `locker` for leadership of `name`: each term's fn runs through the
/// runner (`post` takes it there as an [`Input::Term`]), which tells its end ([`Outcome::Revoked`]); the caller hears
/// as campaign `id`'s who leads while it does not ([`Outcome::Leader`]) and an error it met ([`Outcome::Erred`]).
/// Within the Tokio runtime.
pub fn campaign(
    locker: &Locker,
    id: u32,
    name: &str,
    options: CampaignOptions,
    post: Arc<dyn Post>,
) -> Result<Campaign, SnatchError> {
    validate_duration("retry", options.retry)?;
    let keys = LeaderKeys::new(&locker.config().prefix, name, locker.one_slot())?;
    let lock = LockOptions { ttl: options.ttl, auto_extend: true, wait: options.retry, ..LockOptions::default() };
    lock.validate()?;
    let guard = locker.enter()?;
    let job = Job::new();
    let (resign, requests) = mpsc::unbounded_channel();
    let driver = Driver { locker: locker.clone(), id, keys, lock, retry: options.retry, post };
    let handle = job.clone();
    tokio::spawn(async move {
        driver.drive(handle.stop_requests(), requests).await;
        handle.ended();
        drop(guard);
    });
    locker.register_job(job.clone());
    Ok(Campaign { job, resign })
}

/// One campaign.
struct Driver {
    locker: Locker,
    /// The caller's id for the campaign.
    id: u32,
    keys: LeaderKeys,
    /// A term's lock: renewed, and waited for up to `retry`.
    lock: LockOptions,
    retry: Duration,
    post: Arc<dyn Post>,
}

/// Resigns asked for, answered once the term under way (if any) has ended.
type Resigns = mpsc::UnboundedReceiver<oneshot::Sender<()>>;

impl Driver {
    /// Campaigns until stopped.
    async fn drive(self, mut stop: watch::Receiver<bool>, mut resigns: Resigns) {
        while !*stop.borrow() {
            let pause = match self.locker.acquire_keys(self.keys.lock.clone(), &self.lock).await {
                Ok(Some(lease)) => {
                    self.term(lease, &mut stop, &mut resigns).await;
                    true
                }
                Ok(None) => {
                    // Not elected within `retry`: the caller hears who leads (its `leader`).
                    match leading::read(&self.locker, &self.keys).await {
                        Ok(read) => self.tell(Outcome::Leader(read.map(|leading| (leading.leader, leading.term)))),
                        Err(error) => self.tell(Outcome::Erred(error)),
                    }
                    false
                }
                Err(SnatchError::Closed) => break,
                Err(error) => {
                    self.tell(Outcome::Erred(error));
                    true
                }
            };
            // Nothing to resign from now.
            while let Ok(done) = resigns.try_recv() {
                let _ = done.send(());
            }
            if pause {
                // Others campaign meanwhile: after a resign one of them takes over, and a fn that returns at once does
                // not make a loop of terms.
                tokio::select! {
                    () = tokio::time::sleep(self.retry) => {}
                    _ = stop.wait_for(|&stopped| stopped) => {}
                }
            }
        }
    }

    /// A term under `lease`: noted, its fn run through the runner until it settles (its signal aborted when the
    /// leader resigns or stops), the lock given back, the end noted and told.
    async fn term(&self, lease: Arc<Lease>, stop: &mut watch::Receiver<bool>, resigns: &mut Resigns) {
        let fence = lease.fence();
        leading::note(&self.locker, &self.keys, Some((lease.token(), fence))).await;
        let (settled, fn_settled) = oneshot::channel();
        post_or_undo(&*self.post, Input::Term { campaign: self.id, lease: lease.clone(), settled });
        tokio::pin!(fn_settled);
        let (mut asked, mut resigned) = (None, Vec::new());
        let settled = loop {
            let reason = tokio::select! {
                settled = &mut fn_settled => break settled,
                _ = stop.changed(), if asked != Some(Revoked::Stopped) => (Revoked::Stopped, AbortReason::Stopped),
                Some(done) = resigns.recv() => {
                    resigned.push(done);
                    (Revoked::Resigned, AbortReason::Resigned)
                }
            };
            if asked.is_none() || reason.0 == Revoked::Stopped {
                asked = Some(reason.0);
                let _ = self.post.post(Input::EndTerm { campaign: self.id, reason: reason.1 });
            }
        };
        let _ = lease.release().await;
        leading::note(&self.locker, &self.keys, None).await;
        if let Ok(FnSettled { id, failure, lost }) = settled {
            let reason = Revoked::of(lost, failure.is_some(), asked);
            let _ = self.post.post(Input::Revoked { id, fence, reason });
        }
        for done in resigned {
            let _ = done.send(());
        }
    }

    /// Tells the caller `outcome` of the campaign.
    fn tell(&self, outcome: Outcome) {
        let _ = self.post.post(Input::Tell(self.id, outcome));
    }
}
