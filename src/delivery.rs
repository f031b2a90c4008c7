//! What the facade hears: the runner's outcomes (snatch-protocol's `Outcome`, the one outcome type), each mapped to
//! JS here, once, as the arguments of the facade's `deliver(kind, id, fence, extra)`. Called on the JS thread, from a
//! socket's loop callback or the inbox's, the way node calls JS from I/O: in one callback scope, so that the promise
//! reactions the calls cause run before the loop goes on.

use crate::errors::NativeError;
use napi::bindgen_prelude::{FunctionRef, ToNapiValue};
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use snatch_core::protocol::run::{Outcome, SkipReason};
use snatch_core::Told;
use std::ptr;

/// The facade's delivery function, `(kind, id, fence?, extra?)`: the binding makes its arguments itself.
pub(crate) type Deliver = FunctionRef<(), ()>;

/// The `kind` of `deliver(kind, id, fence, extra)`, with what `fence` and `extra` then are; the facade reads the
/// values from the binding (`OutcomeKind` of binding.js), so that both sides share one definition.
#[napi]
#[derive(Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// Call the fn of run `id` under `fence`; `extra`: the schedule's [`OccurrenceArgs`], for an occurrence.
    Call = 0,
    /// The lease of run or lock `id` was lost.
    Lost = 1,
    /// Run `id` ended after its fn ran under `fence`; `extra`: its lease lapsed.
    Ran = 2,
    /// Run or acquisition `id` ended without the lock.
    NotAcquired = 3,
    /// Acquisition `id` got the lock, with `fence`; `extra`: its token.
    Locked = 4,
    /// Operation `id` answered `extra` (a boolean).
    Done = 5,
    /// Inspection `id`: the key is held, with `fence`, `extra` its [`HeldArgs`]; free without them.
    Inspected = 6,
    /// Run, acquisition or operation `id` failed: `extra` is the [`NativeError`].
    Failed = 7,
    /// Schedule `id` did not run an occurrence here: `extra` is its [`SkippedArgs`].
    Skipped = 8,
    /// Schedule `id` could not claim an occurrence: `extra` is its [`UnclaimedArgs`].
    Unclaimed = 9,
}

/// `extra` of an occurrence's [`OutcomeKind::Call`].
#[napi(object)]
pub struct OccurrenceArgs {
    /// The schedule, by the facade's id for it.
    pub schedule: u32,
    /// The occurrence, in epoch milliseconds.
    pub tick: f64,
}

/// `extra` of a held key's [`OutcomeKind::Inspected`].
#[napi(object)]
pub struct HeldArgs {
    /// Its lease left, in ms.
    pub ttl: f64,
    /// How many hold it.
    pub holders: u32,
}

/// `extra` of [`OutcomeKind::Skipped`].
#[napi(object)]
pub struct SkippedArgs {
    pub tick: f64,
    /// `taken` or `overlap`.
    pub reason: String,
}

/// `extra` of [`OutcomeKind::Unclaimed`].
#[napi(object)]
pub struct UnclaimedArgs {
    pub tick: f64,
    pub error: NativeError,
}

/// The arguments of one outcome: its kind, its fence, and its extra value.
enum Extra {
    None,
    Bool(bool),
    Text(String),
    Occurrence(OccurrenceArgs),
    Held(HeldArgs),
    Error(NativeError),
    Skipped(SkippedArgs),
    Unclaimed(UnclaimedArgs),
}

/// `outcome` as `deliver`'s arguments: the one mapping of outcomes to JS.
fn arguments(outcome: Outcome) -> (OutcomeKind, Option<i64>, Extra) {
    match outcome {
        Outcome::Call { fence, occurrence: None } => (OutcomeKind::Call, Some(fence), Extra::None),
        Outcome::Call { fence, occurrence: Some(o) } => {
            let occurrence = OccurrenceArgs { schedule: o.schedule, tick: o.tick as f64 };
            (OutcomeKind::Call, Some(fence), Extra::Occurrence(occurrence))
        }
        Outcome::Lost => (OutcomeKind::Lost, None, Extra::None),
        Outcome::Ran { fence, lost } => (OutcomeKind::Ran, Some(fence), Extra::Bool(lost)),
        Outcome::NotAcquired => (OutcomeKind::NotAcquired, None, Extra::None),
        Outcome::Locked { fence, token } => (OutcomeKind::Locked, Some(fence), Extra::Text(token)),
        Outcome::Done(answer) => (OutcomeKind::Done, None, Extra::Bool(answer)),
        Outcome::Inspected(None) => (OutcomeKind::Inspected, None, Extra::None),
        Outcome::Inspected(Some(held)) => {
            let args = HeldArgs { ttl: held.ttl_ms as f64, holders: held.holders };
            (OutcomeKind::Inspected, Some(held.fence), Extra::Held(args))
        }
        Outcome::Failed(e) => (OutcomeKind::Failed, None, Extra::Error((&e).into())),
        Outcome::Skipped { tick, reason } => {
            let reason = match reason {
                SkipReason::Taken => "taken",
                SkipReason::Overlap => "overlap",
            };
            (OutcomeKind::Skipped, None, Extra::Skipped(SkippedArgs { tick: tick as f64, reason: reason.to_owned() }))
        }
        Outcome::Unclaimed { tick, error } => {
            let args = UnclaimedArgs { tick: tick as f64, error: (&error).into() };
            (OutcomeKind::Unclaimed, None, Extra::Unclaimed(args))
        }
    }
}

/// Calls the facade's `deliver` for outcomes, on the JS thread of one environment.
pub(crate) struct Delivery {
    env: sys::napi_env,
    deliver: Deliver,
    /// The async resource the calls are made in (a reference to an empty object), and its context.
    resource: sys::napi_ref,
    async_context: sys::napi_async_context,
}

impl Delivery {
    /// Delivers to `deliver` on the JS thread of `env`. An error when N-API does not make the async resource
    /// (nothing is left of it then).
    pub(crate) fn new(env: &Env, deliver: Deliver) -> napi::Result<Self> {
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
        Ok(Self { env: raw, deliver, resource, async_context })
    }

    /// Hands the outcomes of `told` to the facade (nothing when empty), on the JS thread, inside a handle scope,
    /// leaving it empty. An exception the facade throws is reported as uncaught, as for a callback from node itself;
    /// so is one left by N-API failing to make an outcome's arguments, the outcome being skipped.
    pub(crate) fn deliver(&self, told: &mut Told) {
        if told.is_empty() {
            return;
        }
        let env = self.env;
        let handle = Env::from_raw(env);
        let Ok(deliver) = self.deliver.borrow_back(&handle) else { return };
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
            for (id, outcome) in told.drain(..) {
                let (kind, fence, extra) = arguments(outcome);
                let mut args = [receiver; 4];
                let made = ok(sys::napi_create_uint32(env, kind as u32, &mut args[0]))
                    && ok(sys::napi_create_uint32(env, id, &mut args[1]))
                    && fence.is_none_or(|fence| ok(sys::napi_create_bigint_int64(env, fence, &mut args[2])))
                    && extra_value(env, extra, &mut args[3]);
                if made {
                    call(env, receiver, deliver.raw(), &args);
                } else {
                    report(env);
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

/// Makes `extra` into `value` (left as it is for none); whether it was made.
// SAFETY: callers are on the JS thread of `env`, inside a handle scope.
unsafe fn extra_value(env: sys::napi_env, extra: Extra, value: &mut sys::napi_value) -> bool {
    // SAFETY: per the contract; each conversion makes a value of `env`.
    let made = unsafe {
        match extra {
            Extra::None => return true,
            Extra::Bool(b) => return ok(sys::napi_get_boolean(env, b, value)),
            Extra::Text(text) => {
                return ok(sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, value));
            }
            Extra::Occurrence(args) => OccurrenceArgs::to_napi_value(env, args),
            Extra::Held(args) => HeldArgs::to_napi_value(env, args),
            Extra::Error(args) => NativeError::to_napi_value(env, args),
            Extra::Skipped(args) => SkippedArgs::to_napi_value(env, args),
            Extra::Unclaimed(args) => UnclaimedArgs::to_napi_value(env, args),
        }
    };
    match made {
        Ok(made) => {
            *value = made;
            true
        }
        Err(_) => false,
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
    Err(napi::Error::new(status.into(), format!("cannot make the async resource of the delivery ({what})")))
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
        // SAFETY: dropped on the JS thread of `env` (with the locker), before the environment is gone; both were made
        // by `new`. They fail only for what N-API did not make: nothing to do about the statuses.
        unsafe {
            sys::napi_async_destroy(self.env, self.async_context);
            sys::napi_delete_reference(self.env, self.resource);
        }
    }
}
