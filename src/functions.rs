//! The calls every run makes, `startRun` and `taskDone` (its fn settled), and those of a one-attempt lock,
//! `startTryLock` and `startRelease`: plain JS functions (ffi's `function`) that the facade gets once per locker from
//! `NativeLocker::runFunctions()`. A napi-rs function or method spends more on tracking its arguments' and receiver's
//! borrows than the direct call it starts (bench/README.md, profile step 23).
//! Their signatures are the types of [`RunFunctions`]' fields, from which binding.d.ts is generated; the functions that
//! read the arguments must take the same types, or the binding does not build.

#![allow(clippy::type_complexity, reason = "the argument types are spelled out: binding.d.ts is generated from them")]

use crate::errors::{js_error, ErrorClass};
use crate::ffi::napi::function;
use crate::host::Host;
use crate::options::{lock_options, LockInit};
use napi::bindgen_prelude::{FnArgs, Function};
use napi::Env;
use napi_derive::napi;
use snatch_core::SnatchError;
use std::rc::Rc;

/// A call's outcome: a bad argument, or an error starting it, is thrown.
type Thrown = Result<(), napi::Error<ErrorClass>>;

/// The calls every run or one-attempt lock makes, of one locker.
#[napi(object)]
pub struct RunFunctions<'env> {
    /// `(id, key, required, ttl?, minHold?, autoExtend?, wait?, fair?)`: starts run `id` of the facade's fn under
    /// `key`; with `required` (withLock), not getting the lock is a timeout error.
    #[allow(clippy::type_complexity)]
    pub start_run: Function<
        'env,
        FnArgs<(u32, String, bool, Option<f64>, Option<f64>, Option<bool>, Option<f64>, Option<bool>)>,
        (),
    >,
    /// `(id, failure?)`: the fn of run `id` settled (`failure`: the message of what it threw or rejected with, for a
    /// schedule's record); its lock is given back, and the run ends once it is.
    pub task_done: Function<'env, FnArgs<(u32, Option<String>)>, ()>,
    /// `(id, key, ttl?, minHold?, autoExtend?)`: starts acquisition `id` of `key`, one attempt, for a lock the facade
    /// holds.
    pub start_try_lock: Function<'env, FnArgs<(u32, String, Option<f64>, Option<f64>, Option<bool>)>, ()>,
    /// `(id, lock)`: starts operation `id`, the release of lock `lock`.
    pub start_release: Function<'env, FnArgs<(u32, u32)>, ()>,
}

impl<'env> RunFunctions<'env> {
    /// The calls of `host`'s locker; each function keeps `host` until collected.
    pub(crate) fn new(env: &'env Env, host: &Rc<Host>) -> napi::Result<Self> {
        Ok(Self {
            start_run: function(env, c"startRun", host.clone(), start_run)?,
            task_done: function(env, c"taskDone", host.clone(), task_done)?,
            start_try_lock: function(env, c"startTryLock", host.clone(), start_try_lock)?,
            start_release: function(env, c"startRelease", host.clone(), start_release)?,
        })
    }
}

/// `startRun`: see [`RunFunctions::start_run`] (whose type the arguments' must be, or this does not build).
fn start_run(
    host: &Rc<Host>,
    args: Args<(u32, String, bool, Option<f64>, Option<f64>, Option<bool>, Option<f64>, Option<bool>)>,
) -> Thrown {
    let (id, key, required, ttl, min_hold, auto_extend, wait, fair) = args.map_err(invalid)?;
    let options = lock_options(Some(LockInit { ttl, min_hold, auto_extend, wait, fair }), true).map_err(js_error)?;
    host.step(|runner, out| runner.run(id, &key, &options, required, out)).map_err(js_error)
}

/// `taskDone`: see [`RunFunctions::task_done`].
fn task_done(host: &Rc<Host>, args: Args<(u32, Option<String>)>) -> Thrown {
    let (id, failure) = args.map_err(invalid)?;
    host.step(|runner, out| runner.task_done(id, failure, out));
    Ok(())
}

/// `startTryLock`: see [`RunFunctions::start_try_lock`].
fn start_try_lock(host: &Rc<Host>, args: Args<(u32, String, Option<f64>, Option<f64>, Option<bool>)>) -> Thrown {
    let (id, key, ttl, min_hold, auto_extend) = args.map_err(invalid)?;
    let options =
        lock_options(Some(LockInit { ttl, min_hold, auto_extend, wait: None, fair: None }), false).map_err(js_error)?;
    host.step(|runner, out| runner.try_lock(id, &key, &options, out)).map_err(js_error)
}

/// `startRelease`: see [`RunFunctions::start_release`].
fn start_release(host: &Rc<Host>, args: Args<(u32, u32)>) -> Thrown {
    let (id, lock) = args.map_err(invalid)?;
    host.step(|runner, out| runner.release(id, lock, out));
    Ok(())
}

/// A call's arguments, or why they are not of their types.
type Args<A> = Result<A, String>;

/// The error of an argument of the wrong type.
fn invalid(reason: String) -> napi::Error<ErrorClass> {
    js_error(SnatchError::type_arg(reason))
}
