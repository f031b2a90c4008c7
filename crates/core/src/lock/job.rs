//! Work a locker runs in the background until it is stopped (a schedule): `close` stops each and waits for its end.

use tokio::sync::watch;

/// A handle to one piece of background work: asks it to stop, and tells when it has ended. Clones are handles to
/// the same work.
#[derive(Clone)]
pub(crate) struct Job {
    stop: watch::Sender<bool>,
    done: watch::Sender<bool>,
}

impl Job {
    /// A job not yet asked to stop nor ended.
    pub(crate) fn new() -> Self {
        Self { stop: watch::Sender::new(false), done: watch::Sender::new(false) }
    }

    /// For the work: whether (and when) it is asked to stop.
    pub(crate) fn stop_requests(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// For the work: it has ended.
    pub(crate) fn ended(&self) {
        self.done.send_replace(true);
    }

    /// Asks the work to stop and waits for its end. Idempotent.
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|d| *d).await;
    }
}
