//! The way results reach JS: every operation is started by a synchronous call and finishes as a `Completion`,
//! queued and handed to the facade in batches by one weak ThreadsafeFunction per locker. This avoids creating a
//! promise-resolving ThreadsafeFunction for each call (what an `async fn` binding does), and under concurrency one
//! wake-up of the JS thread delivers many results. The calls of run tasks and lost notices travel the same queue,
//! so the facade hears of a run's task, its loss and its end in that order.

use crate::errors::NativeError;
use napi::bindgen_prelude::{BigInt, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use snatch_core::SnatchError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The end of one operation, or a notice that the lease of acquisition `id` was lost.
#[napi(object)]
#[derive(Default)]
pub struct Completion {
    /// The operation (for a notice: the acquisition) this is about.
    pub id: u32,
    /// A notice that the lease of acquisition `id` was lost, not the end of an operation.
    pub lost_notice: Option<bool>,
    /// A call to run the task of run `id` with `fence`, not the end of an operation.
    pub task: Option<bool>,
    /// The operation failed: why.
    pub error: Option<NativeError>,
    /// Acquired (run, tryLock, lock): the fence. Absent when not acquired.
    pub fence: Option<BigInt>,
    /// tryLock / lock: the token of the acquisition.
    pub token: Option<String>,
    /// run: the lease could not be guaranteed for the whole run.
    pub lost: Option<bool>,
    /// extend / release: whether the lock was still ours; forceRelease: whether there was a lock.
    pub ok: Option<bool>,
    /// inspect of a held key: its lease left in ms (with `fence`, its fence counter).
    pub ttl: Option<f64>,
    /// inspect of a held key: how many hold it.
    pub holders: Option<u32>,
}

impl Completion {
    /// A plain end of operation `id`.
    pub(crate) fn done(id: u32) -> Self {
        Self { id, ..Self::default() }
    }

    /// A notice that the lease of run or lock `id` was lost.
    pub(crate) fn lost_notice(id: u32) -> Self {
        Self { id, lost_notice: Some(true), ..Self::default() }
    }

    /// A call to run the task of run `id` under the lease with `fence`.
    pub(crate) fn task(id: u32, fence: i64) -> Self {
        Self { id, task: Some(true), fence: Some(BigInt::from(fence)), ..Self::default() }
    }

    /// Operation `id` failed with `e`.
    pub(crate) fn failed(id: u32, e: &SnatchError) -> Self {
        Self { id, error: Some(e.into()), ..Self::default() }
    }
}

type Deliver = ThreadsafeFunction<(), (), Vec<Completion>, Status, false, true>;

/// Completions waiting for the JS thread.
pub(crate) struct Completions {
    queue: Arc<Mutex<Vec<Completion>>>,
    /// A delivery is scheduled and has not drained the queue yet.
    scheduled: Arc<AtomicBool>,
    /// The JS environment is gone (the ThreadsafeFunction was finalized): nothing is delivered any more.
    closed: Arc<AtomicBool>,
    deliver: Deliver,
}

impl Completions {
    /// Delivers batches to `deliver(completions)` on the JS thread. Weak: pending completions do not keep the
    /// process alive (the facade does, while operations are pending). `on_closed` runs once the JS environment can
    /// no longer receive anything (it is torn down, say a worker thread terminated), so that nothing waits for JS.
    pub(crate) fn new(
        deliver: Function<Vec<Completion>, ()>,
        on_closed: impl FnOnce() + Send + 'static,
    ) -> napi::Result<Self> {
        let queue = Arc::new(Mutex::new(Vec::new()));
        let scheduled = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicBool::new(false));
        let (q, s) = (queue.clone(), scheduled.clone());
        // Dropped with the callback, which napi-rs does when the ThreadsafeFunction is finalized.
        let finalized = Finalized { closed: closed.clone(), on_closed: Some(Box::new(on_closed)) };
        let deliver =
            deliver.build_threadsafe_function::<()>().weak::<true>().callee_handled::<false>().build_callback(
                move |_| {
                    let _ = &finalized;
                    s.store(false, Ordering::SeqCst);
                    Ok(std::mem::take(&mut *q.lock().expect("completion queue poisoned")))
                },
            )?;
        Ok(Self { queue, scheduled, closed, deliver })
    }

    /// Queues `completion` and makes sure a delivery is scheduled. False, and nothing is queued, once the JS
    /// environment is gone.
    pub(crate) fn push(&self, completion: Completion) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        self.queue.lock().expect("completion queue poisoned").push(completion);
        if !self.scheduled.swap(true, Ordering::SeqCst) {
            self.deliver.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
        true
    }
}

/// Marks the completions closed and runs `on_closed` when the delivery callback is dropped.
struct Finalized {
    closed: Arc<AtomicBool>,
    on_closed: Option<Box<dyn FnOnce() + Send>>,
}

impl Drop for Finalized {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(on_closed) = self.on_closed.take() {
            on_closed();
        }
    }
}
