//! Results from the runtime (acquisitions, releases and operations that finished there, lost leases, schedules'
//! occurrences) to the runner, on the JS thread: queued from any thread, and taken in batches by one weak
//! ThreadsafeFunction per locker, so that under concurrency one wake-up of the JS thread takes many. Weak: pending
//! results do not keep the process alive (the facade does, while operations are pending).

use napi::bindgen_prelude::FunctionCallContext;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use snatch_core::{Input, Post};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Inputs waiting for the JS thread.
#[derive(Default)]
struct Queue {
    inputs: Mutex<Vec<Input>>,
    /// A wake-up is scheduled and has not taken the queue yet.
    scheduled: AtomicBool,
    /// The JS environment is gone (the ThreadsafeFunction was finalized): nothing is taken any more.
    closed: AtomicBool,
}

/// The runner's inbox: what the runtime posts to, the binding's side of [`Post`].
pub(crate) struct Inbox {
    queue: Arc<Queue>,
    wake: ThreadsafeFunction<(), (), (), Status, false, true>,
}

impl Inbox {
    /// An inbox whose batches `take` gets on the JS thread of `env`. `on_closed` gets what is left once the JS
    /// environment can no longer take anything (it is torn down, say a worker thread terminated), so that nothing
    /// waits for JS.
    pub(crate) fn new(
        env: &Env,
        mut take: impl FnMut(Vec<Input>) + 'static,
        on_closed: impl FnOnce(Vec<Input>) + 'static,
    ) -> napi::Result<Self> {
        let queue = Arc::new(Queue::default());
        // The ThreadsafeFunction calls a JS function after each batch: this one does nothing.
        let wake =
            env.create_function_from_closure::<(), (), _>("redis-snatch inbox", |_: FunctionCallContext| Ok(()))?;
        // Dropped with the callback, which napi-rs does on the JS thread when the ThreadsafeFunction is finalized.
        let finalized = Finalized { queue: queue.clone(), on_closed: Some(Box::new(on_closed)) };
        let taken = queue.clone();
        let wake = wake.build_threadsafe_function::<()>().weak::<true>().callee_handled::<false>().build_callback(
            move |_| {
                let _ = &finalized;
                taken.scheduled.store(false, Ordering::SeqCst);
                let inputs = std::mem::take(&mut *taken.inputs.lock().expect("inbox poisoned"));
                take(inputs);
                Ok(())
            },
        )?;
        Ok(Self { queue, wake })
    }
}

impl Post for Inbox {
    fn post(&self, input: Input) -> Result<(), Input> {
        {
            // Checked under the queue's lock, which closing takes too: nothing is queued once the queue is left.
            let mut inputs = self.queue.inputs.lock().expect("inbox poisoned");
            if self.queue.closed.load(Ordering::SeqCst) {
                return Err(input);
            }
            inputs.push(input);
        }
        if !self.queue.scheduled.swap(true, Ordering::SeqCst) {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
        Ok(())
    }
}

/// Marks the inbox closed and hands what is left to `on_closed` when the wake-up callback is dropped.
struct Finalized {
    queue: Arc<Queue>,
    on_closed: Option<Box<dyn FnOnce(Vec<Input>)>>,
}

impl Drop for Finalized {
    fn drop(&mut self) {
        let left = {
            let mut inputs = self.queue.inputs.lock().expect("inbox poisoned");
            self.queue.closed.store(true, Ordering::SeqCst);
            std::mem::take(&mut *inputs)
        };
        if let Some(on_closed) = self.on_closed.take() {
            on_closed(left);
        }
    }
}
