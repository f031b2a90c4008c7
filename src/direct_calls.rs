//! One-attempt runs (snatchTask, withLock without wait), tryLock, and the release of any lock, on a single
//! Redis by direct calls over the loop socket (loop_socket.rs): a run's acquisition reply has the facade call
//! the task within the same loop callback, and the task's end sends the release, with no thread hand-off; the
//! completions go to the facade's delivery callbacks directly. A call the socket could not complete goes on over the
//! locker's connection, as it would have without the socket.

use crate::completions::{Completion, Completions};
use crate::direct_sockets::DirectSockets;
use crate::loop_socket::{Handler, LoopSocket};
use crate::outcomes::{acquired, keep_lock, ran_completion, start_op, task_under, Leases, Settling};
use napi::bindgen_prelude::{spawn, within_runtime_if_available, BigInt, Either, FunctionRef, ToNapiValue};
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use rustc_hash::FxHashMap;
use snatch_core::protocol::direct::commands::{DirectCall, DirectCommand};
use snatch_core::protocol::direct::session::{CallReply, NoReply};
use snatch_core::{run_under, Busy, DirectAcquire, DirectRelease, Lease, LockOptions, Locker, Settled, SnatchError};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Runs whose task is under way, by run id, with their lease and their count on the locker.
pub(crate) type Running = Arc<Mutex<FxHashMap<u32, (Arc<Lease>, Busy)>>>;

/// The facade's delivery callback.
pub(crate) type Deliver = FunctionRef<Vec<Completion>, ()>;

/// The facade's callback for the frequent events: `(kind, id, fence, extra)` (see [`Event`]).
pub(crate) type DeliverEvent = FunctionRef<EventArgs, ()>;

/// The arguments of `deliverEvent`.
pub(crate) type EventArgs = (u32, u32, Option<BigInt>, Option<Either<bool, String>>);

/// A direct call awaiting its reply. One per call in flight, moved a few times: boxing the larger variant would cost
/// an allocation per call instead.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Call {
    /// The acquisition of run `run`.
    Acquire { run: u32, required: bool, attempt: DirectAcquire, busy: Busy },
    /// The release after the task of run `run`: the run completes with `fence` and `lost`.
    Release { run: u32, fence: i64, lost: bool, release: DirectRelease, busy: Busy },
    /// The acquisition of tryLock `id`.
    Lock { id: u32, attempt: DirectAcquire, busy: Busy },
    /// Operation `id`: the release of a lock.
    Unlock { id: u32, release: DirectRelease },
}

impl DirectCall for Call {
    fn command(&self) -> DirectCommand<'_> {
        match self {
            Self::Acquire { attempt, .. } | Self::Lock { attempt, .. } => attempt.command(),
            Self::Release { release, .. } | Self::Unlock { release, .. } => release.command(),
        }
    }

    fn encoded(&mut self, at: std::time::Instant) {
        if let Self::Acquire { attempt, .. } | Self::Lock { attempt, .. } = self {
            attempt.encoded(at);
        }
    }
}

/// The direct path of one locker.
pub(crate) struct DirectCalls {
    sockets: DirectSockets<Call>,
    context: Arc<Context>,
}

/// What the replies need: the locker and the binding's state shared with its runtime path.
pub(crate) struct Context {
    pub(crate) locker: Locker,
    pub(crate) completions: Arc<Completions>,
    pub(crate) settling: Settling,
    pub(crate) running: Running,
    pub(crate) leases: Leases,
    /// Set when a direct call had to go over the locker's connection: on a cluster, the slot map may be out of date.
    pub(crate) stale: Arc<AtomicBool>,
}

impl DirectCalls {
    /// The direct path of `context.locker`, delivering to `deliver` and `deliver_event` on the JS thread of `env` (see
    /// [`Delivery`]), and through `context.completions` what finishes on the runtime.
    pub(crate) fn new(
        env: &Env,
        context: Context,
        deliver: Deliver,
        deliver_event: DeliverEvent,
    ) -> napi::Result<Self> {
        let timeout = context.locker.config().command_timeout;
        let context = Arc::new(context);
        let delivery = Delivery::new(env, deliver, deliver_event)?;
        let on_replies = context.clone();
        let handler: Handler<Call> = Box::new(move |replies| {
            let events = within_runtime_if_available(|| on_replies.settle(replies));
            delivery.deliver(events);
        });
        let sockets = DirectSockets::new(env.raw(), &context.locker, timeout, handler, context.stale.clone());
        Ok(Self { sockets, context })
    }

    /// Starts run `id` by a direct call: false, and nothing started, when the call cannot be made (options that
    /// wait, several nodes, the socket not open yet).
    pub(crate) fn start(&self, id: u32, key: &str, options: &LockOptions, required: bool) -> Result<bool, SnatchError> {
        self.acquire(key, options, |attempt, busy| Call::Acquire { run: id, required, attempt, busy })
    }

    /// Starts tryLock `id` by a direct call: false, and nothing started, when the call cannot be made.
    pub(crate) fn try_lock(&self, id: u32, key: &str, options: &LockOptions) -> Result<bool, SnatchError> {
        self.acquire(key, options, |attempt, busy| Call::Lock { id, attempt, busy })
    }

    /// Sends the acquisition of `key` that `call` makes a call of, if it can go by a direct call.
    fn acquire(
        &self,
        key: &str,
        options: &LockOptions,
        call: impl FnOnce(DirectAcquire, Busy) -> Call,
    ) -> Result<bool, SnatchError> {
        let locker = &self.context.locker;
        if !options.wait.is_zero() {
            return Ok(false);
        }
        let Some(attempt) = DirectAcquire::new(locker, key, options)? else { return Ok(false) };
        let Some(socket) = self.sockets.for_slot(locker, || attempt.slot()) else { return Ok(false) };
        let busy = locker.enter()?;
        Ok(socket.send(call(attempt, busy)).is_ok())
    }

    /// Starts one-attempt acquisition `id` of `key`: by a direct call when it can go by one, else on the runtime.
    /// Completes with the fence and token when acquired (then a lost notice follows if the lease is lost), without
    /// them when the key is held.
    pub(crate) fn start_try_lock(&self, id: u32, key: String, options: LockOptions) -> Result<(), SnatchError> {
        if self.try_lock(id, &key, &options)? {
            return Ok(());
        }
        let context = &self.context;
        let (locker, leases, completions) =
            (context.locker.clone(), context.leases.clone(), context.completions.clone());
        spawn(async move {
            acquired(id, locker.try_lock(&key, &options).await, &leases, &completions);
        });
        Ok(())
    }

    /// Starts operation `id`: release lock `lock` (subject to minHold), by a direct call when it can go by one.
    /// Completes with whether it was still ours.
    pub(crate) fn start_release(&self, id: u32, lock: u32) {
        let lease = self.context.leases.lock().expect("leases poisoned").remove(&lock);
        if lease.as_ref().is_some_and(|lease| self.release(id, lease)) {
            return;
        }
        start_op(&self.context.completions, id, async move {
            let ok = match lease {
                Some(lease) => lease.release().await?,
                None => false,
            };
            Ok(Completion { ok: Some(ok), ..Completion::done(id) })
        });
    }

    /// Starts operation `id`, the release of `lease`, by a direct call: false, and nothing started, when it does not
    /// go that way (see `Lease::direct_release`).
    fn release(&self, id: u32, lease: &Arc<Lease>) -> bool {
        let Some(socket) = self.sockets.for_slot(&self.context.locker, || lease.slot()) else { return false };
        let Some(release) = DirectRelease::of(lease) else { return false };
        self.send(Some(&socket), Call::Unlock { id, release });
        true
    }

    /// Sends `call` on `socket`; without one, or if it closed meanwhile, the call goes on over the locker's
    /// connection (a call without a reply produces no event to deliver).
    fn send(&self, socket: Option<&LoopSocket<Call>>, call: Call) {
        let unsent = match socket {
            Some(socket) => socket.send(call).err(),
            None => Some(call),
        };
        if let Some(call) = unsent {
            within_runtime_if_available(|| self.context.settle(vec![(call, Err(NoReply::Dropped))]));
        }
    }

    /// The task of run `id` settled: a direct run releases its lease; a run on the runtime hears of it.
    pub(crate) fn task_done(&self, id: u32) {
        let Some((lease, busy)) = self.context.running.lock().expect("running poisoned").remove(&id) else {
            if let Some(settled) = self.context.settling.lock().expect("settling poisoned").remove(&id) {
                let _ = settled.send(());
            }
            return;
        };
        let (fence, lost) = (lease.fence(), lease.lapsed());
        let Some(release) = DirectRelease::of(&lease) else {
            // minHold keeps the key, or it is released already: the locker's own release does it.
            let completions = self.context.completions.clone();
            spawn(async move {
                let _ = lease.release().await;
                completions.push(ran_completion(id, fence, lost));
                drop(busy);
            });
            return;
        };
        let socket = self.sockets.for_slot(&self.context.locker, || lease.slot());
        self.send(socket.as_deref(), Call::Release { run: id, fence, lost, release, busy });
    }

    /// The locker and the state it shares with the runtime path.
    pub(crate) fn context(&self) -> &Context {
        &self.context
    }

    /// The locker is closing: the sockets close once the calls in flight are answered.
    pub(crate) fn close(&self) {
        self.sockets.close();
    }
}

impl Context {
    /// Turns replies into completions to deliver now; calls without a usable reply go on over the locker's
    /// connection. Within the runtime.
    fn settle(self: &Arc<Self>, replies: Vec<(Call, CallReply)>) -> Vec<Event> {
        let mut out = Vec::with_capacity(replies.len());
        for (call, outcome) in replies {
            match call {
                Call::Acquire { run, required, attempt, busy } => {
                    // For the error of a withLock that did not get the lock (settling consumes the attempt).
                    let key = required.then(|| attempt.key().to_owned());
                    match attempt.settle(outcome) {
                        Settled::Done(Ok(Some(lease))) => {
                            out.push(Event::Task(run, lease.fence()));
                            let completions = self.completions.clone();
                            lease.on_lost(move || {
                                completions.push(Completion::lost_notice(run));
                            });
                            self.running.lock().expect("running poisoned").insert(run, (lease, busy));
                        }
                        Settled::Done(Ok(None)) => out.push(match key {
                            Some(key) => Event::Other(not_acquired(run, &key)),
                            None => Event::NotAcquired(run),
                        }),
                        Settled::Done(Err(e)) => out.push(Event::Other(Completion::failed(run, &e))),
                        Settled::Fallback(attempt) => {
                            self.stale.store(true, Ordering::SeqCst);
                            self.clone().acquire_on_runtime(run, required, attempt, busy)
                        }
                    }
                }
                Call::Lock { id, attempt, busy } => {
                    match attempt.settle(outcome) {
                        Settled::Done(Ok(Some(lease))) => {
                            // A lost notice goes through the completion queue, so after this delivery in any case.
                            keep_lock(id, &lease, &self.leases, &self.completions, || {
                                out.push(Event::Locked(id, lease.fence(), lease.token().to_owned()))
                            });
                        }
                        Settled::Done(Ok(None)) => out.push(Event::NotAcquired(id)),
                        Settled::Done(Err(e)) => out.push(Event::Other(Completion::failed(id, &e))),
                        Settled::Fallback(attempt) => {
                            self.stale.store(true, Ordering::SeqCst);
                            let (leases, completions) = (self.leases.clone(), self.completions.clone());
                            spawn(async move {
                                acquired(id, attempt.fallback().await, &leases, &completions);
                                drop(busy);
                            });
                        }
                    }
                }
                Call::Unlock { id, release } => match release.settle(outcome) {
                    Settled::Done(Ok(ok)) => out.push(Event::Released(id, ok)),
                    Settled::Done(Err(e)) => out.push(Event::Other(Completion::failed(id, &e))),
                    Settled::Fallback(release) => {
                        self.stale.store(true, Ordering::SeqCst);
                        let completions = self.completions.clone();
                        spawn(async move {
                            completions.push(released(id, release.fallback().await));
                        });
                    }
                },
                Call::Release { run, fence, lost, release, busy } => {
                    match release.settle(outcome) {
                        // As on the runtime, a failed release does not fail the run: the key expires with its lease.
                        Settled::Done(_) => out.push(Event::Ran(run, fence, lost)),
                        Settled::Fallback(release) => {
                            self.stale.store(true, Ordering::SeqCst);
                            let completions = self.completions.clone();
                            spawn(async move {
                                let _ = release.fallback().await;
                                completions.push(ran_completion(run, fence, lost));
                                drop(busy);
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Makes the acquisition of run `run` over the locker's connection, and the rest of the run on the runtime.
    fn acquire_on_runtime(self: Arc<Self>, run: u32, required: bool, attempt: DirectAcquire, busy: Busy) {
        let key = attempt.key().to_owned();
        spawn(async move {
            let completion = match attempt.fallback().await {
                Ok(Some(lease)) => {
                    let (completions, settling) = (self.completions.clone(), self.settling.clone());
                    let ran = run_under(lease, |lease| task_under(run, lease, completions, settling)).await;
                    ran_completion(run, ran.fence, ran.lost)
                }
                Ok(None) if required => not_acquired(run, &key),
                Ok(None) => Completion::done(run),
                Err(e) => Completion::failed(run, &e),
            };
            self.completions.push(completion);
            drop(busy);
        });
    }
}

/// The completion of run `run` on `key`, which needed the lock (withLock) and did not get it in its one attempt.
fn not_acquired(run: u32, key: &str) -> Completion {
    Completion::failed(run, &snatch_core::not_acquired(key, std::time::Duration::ZERO))
}

/// The completion of operation `id`, a lock's release that came to `result`.
fn released(id: u32, result: Result<bool, snatch_core::SnatchError>) -> Completion {
    match result {
        Ok(ok) => Completion { ok: Some(ok), ..Completion::done(id) },
        Err(e) => Completion::failed(id, &e),
    }
}

/// The `kind` of `deliverEvent(kind, id, fence, extra)`: the facade reads the same values from the binding
/// (`EventKind` of binding.js), so that both sides share one definition.
#[napi]
pub enum EventKind {
    /// Call the task of run `id` under `fence`.
    Task = 0,
    /// Run `id` ended (`extra`: its lease lapsed), or a run or tryLock without the lock (no fence).
    End = 1,
    /// tryLock `id` got the lock (`extra`: the token).
    Locked = 2,
    /// Release `id` ended (`extra`: the key was still ours).
    Released = 3,
}

/// What a reply tells the facade. All but `Other` go to `deliverEvent(kind, id, fence, extra)`, with the
/// [`EventKind`] named at each.
enum Event {
    /// `Task`: call the task of run `.0` under the lease with fence `.1`.
    Task(u32, i64),
    /// `End`: run `.0` ended after its task ran under fence `.1`; `.2` (extra): the lease lapsed meanwhile.
    Ran(u32, i64, bool),
    /// `End`, without fence and extra: run or tryLock `.0` ended without the lock.
    NotAcquired(u32),
    /// `Locked`: tryLock `.0` got the lock with fence `.1` and token `.2` (extra).
    Locked(u32, i64, String),
    /// `Released`: release `.0` ended; `.1` (extra): the key was still ours.
    Released(u32, bool),
    /// Anything else, as a completion, to `deliver(completions)`.
    Other(Completion),
}

/// Calls the facade from a loop callback the way node calls JS from I/O: in one callback scope, so that the promise
/// reactions the calls cause run before the loop goes on. The frequent events go to `deliverEvent(kind, id, fence,
/// extra)` as plain values (a completion object made through N-API costs about as much again as the call); the rest
/// to `deliver(completions)`.
struct Delivery {
    env: sys::napi_env,
    deliver: Deliver,
    deliver_event: DeliverEvent,
    /// The async resource the calls are made in (a reference to an empty object), and its context.
    resource: sys::napi_ref,
    async_context: sys::napi_async_context,
}

impl Delivery {
    /// An error when N-API does not make the async resource (nothing is left of it then).
    fn new(env: &Env, deliver: Deliver, deliver_event: DeliverEvent) -> napi::Result<Self> {
        let raw = env.raw();
        let (mut object, mut name, mut async_context, mut resource) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: on the JS thread of `env` (the locker's constructor), inside its handle scope; each call writes its
        // last argument, and what it wrote is used only once it succeeded.
        unsafe {
            made(sys::napi_create_object(raw, &mut object), "object")?;
            made(sys::napi_create_string_utf8(raw, c"redis-snatch".as_ptr(), 12, &mut name), "name")?;
            made(sys::napi_async_init(raw, object, name, &mut async_context), "async context")?;
            if let Err(e) = made(sys::napi_create_reference(raw, object, 1, &mut resource), "reference") {
                // Fails only for a context N-API did not make: nothing to do about the status.
                sys::napi_async_destroy(raw, async_context);
                return Err(e);
            }
        }
        Ok(Self { env: raw, deliver, deliver_event, resource, async_context })
    }

    /// Hands `events` to the facade (nothing when there are none). An exception it throws is reported as uncaught,
    /// as for a callback from node itself; so is one left by N-API failing to make an event's arguments, the event
    /// being skipped.
    fn deliver(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let env = self.env;
        let handle = Env::from_raw(env);
        let (Ok(deliver), Ok(deliver_event)) =
            (self.deliver.borrow_back(&handle), self.deliver_event.borrow_back(&handle))
        else {
            return;
        };
        let mut others = Vec::new();
        let (mut resource, mut scope, mut receiver) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: on the JS thread of `env`, inside the caller's handle scope; `self.resource` and `self.async_context`
        // live as long as `self`. Each call writes its last argument, and what it wrote is used only once it
        // succeeded: a value that was not made is never passed on.
        unsafe {
            if !ok(sys::napi_get_undefined(env, &mut receiver)) {
                report(env);
                return;
            }
            // Without the callback scope the calls are still made; their promise reactions then run at the next
            // callback from the loop rather than before it goes on.
            let scoped = ok(sys::napi_get_reference_value(env, self.resource, &mut resource))
                && !resource.is_null()
                && ok(sys::napi_open_callback_scope(env, resource, self.async_context, &mut scope));
            for event in events {
                let mut args = [receiver; 4];
                let (kind, id, fence, extra_made) = match event {
                    Event::Task(id, fence) => (EventKind::Task, id, Some(fence), true),
                    Event::Ran(id, fence, lost) => {
                        (EventKind::End, id, Some(fence), ok(sys::napi_get_boolean(env, lost, &mut args[3])))
                    }
                    Event::NotAcquired(id) => (EventKind::End, id, None, true),
                    Event::Locked(id, fence, token) => {
                        let (text, len) = (token.as_ptr().cast(), token.len() as isize);
                        let made = ok(sys::napi_create_string_utf8(env, text, len, &mut args[3]));
                        (EventKind::Locked, id, Some(fence), made)
                    }
                    Event::Released(id, still) => {
                        (EventKind::Released, id, None, ok(sys::napi_get_boolean(env, still, &mut args[3])))
                    }
                    Event::Other(completion) => {
                        others.push(completion);
                        continue;
                    }
                };
                if extra_made
                    && ok(sys::napi_create_uint32(env, kind as u32, &mut args[0]))
                    && ok(sys::napi_create_uint32(env, id, &mut args[1]))
                    && fence.is_none_or(|fence| ok(sys::napi_create_bigint_int64(env, fence, &mut args[2])))
                {
                    call(env, receiver, deliver_event.raw(), &args);
                } else {
                    report(env);
                }
            }
            if !others.is_empty() {
                match Vec::<Completion>::to_napi_value(env, others) {
                    Ok(argument) => call(env, receiver, deliver.raw(), &[argument]),
                    Err(_) => report(env),
                }
            }
            if scoped {
                // Fails only for a scope that is not the innermost, which the calls leave none of: nothing to do
                // about the status.
                sys::napi_close_callback_scope(env, scope);
            }
        }
    }
}

/// Whether an N-API call succeeded.
fn ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}

/// An error unless `status` is `napi_ok`: N-API did not make the delivery's `what`.
fn made(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if ok(status) {
        return Ok(());
    }
    Err(napi::Error::new(status.into(), format!("cannot make the async resource of direct calls ({what})")))
}

/// Calls `function` with `args`; an exception it throws is reported as uncaught.
// SAFETY: callers are on the JS thread of `env`, inside a handle scope, with values of `env` that N-API made.
unsafe fn call(env: sys::napi_env, receiver: sys::napi_value, function: sys::napi_value, args: &[sys::napi_value]) {
    let mut result = ptr::null_mut();
    // SAFETY: per the contract; `args.len()` values are readable at `args.as_ptr()` for the call, which writes
    // `result`.
    let status = unsafe { sys::napi_call_function(env, receiver, function, args.len(), args.as_ptr(), &mut result) };
    if !ok(status) {
        // SAFETY: as above.
        unsafe { report(env) };
    }
}

/// Reports the exception a failed N-API call left pending as uncaught, as node does a callback's (nothing when none
/// is).
// SAFETY: callers are on the JS thread of `env`, inside a handle scope.
unsafe fn report(env: sys::napi_env) {
    let (mut pending, mut exception) = (false, ptr::null_mut());
    // SAFETY: per the contract; each call writes its last argument, and the exception is used only once taken.
    unsafe {
        if ok(sys::napi_is_exception_pending(env, &mut pending))
            && pending
            && ok(sys::napi_get_and_clear_last_exception(env, &mut exception))
        {
            // Nothing is left to report a failure of this to.
            sys::napi_fatal_exception(env, exception);
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        // SAFETY: dropped on the JS thread of `env` (with the socket's state), before the environment is gone; both
        // were made by `new`. They fail only for what N-API did not make: nothing to do about the statuses.
        unsafe {
            sys::napi_async_destroy(self.env, self.async_context);
            sys::napi_delete_reference(self.env, self.resource);
        }
    }
}
