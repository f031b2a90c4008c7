//! Owner-checked releases made in the background, for tokens that may be left in Redis by a call whose outcome
//! came too late to use or never came: an acquisition that failed or timed out, an extension applied after its
//! lease was declared lost or whose reply never came. `close` waits for them, so that a closed locker leaves no
//! such key behind.

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long to wait before releasing a second time when the first release did not find our token: a command sent
/// on another connection (a direct call) may reach Redis after the release that undoes it.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// The background releases of one locker's nodes.
#[derive(Default)]
pub(crate) struct Cleanups {
    tasks: TaskTracker,
    /// Cancelled by `close`: a release waiting to be made again is made at once.
    closing: CancellationToken,
}

impl Cleanups {
    /// Runs `release` (an owner-checked release answering whether it found the token) in the background once `at`
    /// has come (at once when closing). With `again`, when that did not find the token, once more after
    /// [`AGAIN_AFTER`] (at once when closing). Must be called within the Tokio runtime.
    pub(crate) fn release<F, R>(&self, at: Instant, again: bool, release: F)
    where
        F: Fn() -> R + Send + 'static,
        R: Future<Output = bool> + Send,
    {
        let closing = self.closing.clone();
        self.tasks.spawn(async move {
            wait_until(at, &closing).await;
            if release().await || !again {
                return;
            }
            wait_until(Instant::now() + AGAIN_AFTER, &closing).await;
            release().await;
        });
    }

    /// Waits for the releases under way (those started later are not waited for).
    pub(crate) async fn close(&self) {
        self.closing.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Sleeps until `at`, or until `closing` is cancelled.
async fn wait_until(at: Instant, closing: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep_until(at) => {}
        () = closing.cancelled() => {}
    }
}
