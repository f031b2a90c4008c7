//! The calls every run makes, `run` (start it) and `taskDone` (its task settled), and those of a one-attempt lock,
//! `tryLock` and `release`, as plain N-API functions rather than methods of the `#[napi]` class: a napi-rs method
//! call spends about 4,000 instructions on checking and tracking its receiver (unwrap, type tag, borrow registry),
//! more than the direct call it starts (bench/README.md, profile step 23; about 0.9 µs a call against 0.06 µs). The
//! facade gets them once per locker from `NativeLocker::runCalls()`.

use crate::errors::throw;
use crate::host::Host;
use crate::options::{lock_options, LockInit};
use napi::{sys, Env};
use snatch_core::SnatchError;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::rc::Rc;

/// `{ run, taskDone, tryLock, release }` for the locker of `host`; each function keeps `host` until collected.
pub(crate) fn create(env: sys::napi_env, host: &Rc<Host>) -> napi::Result<sys::napi_value> {
    let functions: [(&CStr, Callback); 4] =
        [(c"run", run), (c"taskDone", task_done), (c"tryLock", try_lock), (c"release", release)];
    let mut object = ptr::null_mut();
    // SAFETY: `env` is the current environment, on its JS thread; every pointer passed is valid for the call.
    unsafe {
        made(sys::napi_create_object(env, &mut object))?;
        for (name, callback) in functions {
            let data = Box::into_raw(Box::new(host.clone())).cast::<c_void>();
            let mut function = ptr::null_mut();
            let function_made = made(sys::napi_create_function(
                env,
                name.as_ptr(),
                -1,
                Some(callback),
                data,
                &mut function,
            ))
            .and_then(|()| {
                made(sys::napi_add_finalizer(env, function, data, Some(drop_calls), ptr::null_mut(), ptr::null_mut()))
            });
            if let Err(e) = function_made {
                drop_calls(env, data, ptr::null_mut());
                return Err(e);
            }
            made(sys::napi_set_named_property(env, object, name.as_ptr(), function))?;
        }
    }
    Ok(object)
}

// SAFETY: N-API calls these on the JS thread of the `env` it passes, with the `info` of that call.
type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// `run(id, key, required, ttl?, minHold?, autoExtend?, wait?)`: starts run `id` (see `Runner::run`). Throws bad
/// input as the binding's methods do (errors.rs).
// SAFETY: a `Callback`, made by `create` only.
unsafe extern "C" fn run(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: called by N-API for a function made by `create`, with the `env` and `info` of the call.
    let Some((host, argv)) = (unsafe { arguments::<7>(env, info) }) else { return ptr::null_mut() };
    let started = (|| {
        // SAFETY: the arguments of this call, on its thread.
        let (id, key, required, init) = unsafe {
            let init = lock_init(env, [argv[3], argv[4], argv[5]], Some(argv[6]))?;
            (uint32(env, argv[0])?, string(env, argv[1])?, boolean(env, argv[2])?, init)
        };
        let options = lock_options(Some(init), true)?;
        host.step(|runner, out| runner.run(id, &key, &options, required, out))
    })();
    if let Err(e) = started {
        throw(&Env::from_raw(env), e);
    }
    ptr::null_mut()
}

/// `taskDone(id)`: the task of run `id` settled; its release follows.
// SAFETY: a `Callback`, made by `create` only.
unsafe extern "C" fn task_done(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: called by N-API for a function made by `create`, with the `env` and `info` of the call.
    let Some((host, argv)) = (unsafe { arguments::<1>(env, info) }) else { return ptr::null_mut() };
    // SAFETY: the argument of this call, on its thread.
    match unsafe { uint32(env, argv[0]) } {
        Ok(id) => host.step(|runner, out| runner.task_done(id, out)),
        Err(e) => {
            throw(&Env::from_raw(env), e);
        }
    }
    ptr::null_mut()
}

/// `tryLock(id, key, ttl?, minHold?, autoExtend?)`: starts acquisition `id` (see `Runner::try_lock`). Throws bad
/// input as the binding's methods do (errors.rs).
// SAFETY: a `Callback`, made by `create` only.
unsafe extern "C" fn try_lock(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: called by N-API for a function made by `create`, with the `env` and `info` of the call.
    let Some((host, argv)) = (unsafe { arguments::<5>(env, info) }) else { return ptr::null_mut() };
    let started = (|| {
        // SAFETY: the arguments of this call, on its thread.
        let (id, key, init) = unsafe {
            let init = lock_init(env, [argv[2], argv[3], argv[4]], None)?;
            (uint32(env, argv[0])?, string(env, argv[1])?, init)
        };
        let options = lock_options(Some(init), false)?;
        host.step(|runner, out| runner.try_lock(id, &key, &options, out))
    })();
    if let Err(e) = started {
        throw(&Env::from_raw(env), e);
    }
    ptr::null_mut()
}

/// `release(id, lock)`: starts operation `id`, the release of lock `lock` (see `Runner::release`).
// SAFETY: a `Callback`, made by `create` only.
unsafe extern "C" fn release(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: called by N-API for a function made by `create`, with the `env` and `info` of the call.
    let Some((host, argv)) = (unsafe { arguments::<2>(env, info) }) else { return ptr::null_mut() };
    // SAFETY: the arguments of this call, on its thread.
    match unsafe { uint32(env, argv[0]).and_then(|id| Ok((id, uint32(env, argv[1])?))) } {
        Ok((id, lock)) => host.step(|runner, out| runner.release(id, lock, out)),
        Err(e) => {
            throw(&Env::from_raw(env), e);
        }
    }
    ptr::null_mut()
}

/// The host a function was made for, and its first `N` arguments (`undefined` for those not passed). `None` when
/// N-API could not say (an exception is then pending).
// SAFETY: callers pass the `env` and `info` of a call of a function made by `create`, on its thread.
unsafe fn arguments<'a, const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> Option<(&'a Host, [sys::napi_value; N])> {
    let (mut argc, mut argv, mut data) = (N, [ptr::null_mut(); N], ptr::null_mut());
    // SAFETY: per this function's contract; `argv` has room for `argc` values.
    let status = unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), &mut data) };
    if status != sys::Status::napi_ok || data.is_null() {
        return None;
    }
    // SAFETY: the data of a function made by `create`, alive until the function is collected.
    Some((unsafe { &*data.cast::<Rc<Host>>() }, argv))
}

/// Drops a function's count of the host when the function is collected.
// SAFETY: node calls it once, as the finalizer `create` registered with the `data` it leaked; `create` calls it
// instead when the registration failed.
unsafe extern "C" fn drop_calls(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the box `create` leaked for this function, dropped once.
    drop(unsafe { Box::from_raw(data.cast::<Rc<Host>>()) });
}

/// The lock options given positionally: `ttl?, minHold?, autoExtend?` in `options`, and `wait?` when the call takes it.
// SAFETY: callers pass values of `env`, on its JS thread, inside a handle scope (a call's).
unsafe fn lock_init(
    env: sys::napi_env,
    options: [sys::napi_value; 3],
    wait: Option<sys::napi_value>,
) -> Result<LockInit, SnatchError> {
    // SAFETY: the caller's `env` and values.
    unsafe {
        Ok(LockInit {
            ttl: optional(env, options[0], number)?,
            min_hold: optional(env, options[1], number)?,
            auto_extend: optional(env, options[2], boolean)?,
            wait: match wait {
                Some(wait) => optional(env, wait, number)?,
                None => None,
            },
        })
    }
}

/// `value` converted by `convert`, or `None` when it is `undefined`.
// SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope (a call's).
unsafe fn optional<T>(
    env: sys::napi_env,
    value: sys::napi_value,
    // SAFETY: called under the same contract.
    convert: unsafe fn(sys::napi_env, sys::napi_value) -> Result<T, SnatchError>,
) -> Result<Option<T>, SnatchError> {
    let mut kind = sys::ValueType::napi_undefined;
    // SAFETY: the caller's `env` and `value`.
    check(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
    if kind == sys::ValueType::napi_undefined {
        return Ok(None);
    }
    // SAFETY: as above.
    unsafe { convert(env, value) }.map(Some)
}

// SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope.
unsafe fn uint32(env: sys::napi_env, value: sys::napi_value) -> Result<u32, SnatchError> {
    let mut out = 0;
    // SAFETY: the caller's `env` and `value`.
    check(unsafe { sys::napi_get_value_uint32(env, value, &mut out) })?;
    Ok(out)
}

// SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope.
unsafe fn number(env: sys::napi_env, value: sys::napi_value) -> Result<f64, SnatchError> {
    let mut out = 0.0;
    // SAFETY: the caller's `env` and `value`.
    check(unsafe { sys::napi_get_value_double(env, value, &mut out) })?;
    Ok(out)
}

// SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope.
unsafe fn boolean(env: sys::napi_env, value: sys::napi_value) -> Result<bool, SnatchError> {
    let mut out = false;
    // SAFETY: the caller's `env` and `value`.
    check(unsafe { sys::napi_get_value_bool(env, value, &mut out) })?;
    Ok(out)
}

// SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope.
unsafe fn string(env: sys::napi_env, value: sys::napi_value) -> Result<String, SnatchError> {
    let mut len = 0;
    // SAFETY: the caller's `env` and `value`; the second call writes at most `len` bytes of UTF-8 (N-API's encoding
    // of the string) and a NUL into `bytes`, and how many into `len`.
    unsafe {
        check(sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len))?;
        let mut bytes = Vec::<u8>::with_capacity(len + 1);
        check(sys::napi_get_value_string_utf8(env, value, bytes.as_mut_ptr().cast(), len + 1, &mut len))?;
        bytes.set_len(len);
        Ok(String::from_utf8_unchecked(bytes))
    }
}

/// An error unless `status` is `napi_ok`: a TypeError, for an argument of the wrong type.
fn check(status: sys::napi_status) -> Result<(), SnatchError> {
    if status == sys::Status::napi_ok {
        return Ok(());
    }
    Err(SnatchError::type_arg(format!("an argument of the wrong type (N-API status {status})")))
}

/// An error unless `status` is `napi_ok`: N-API could not make the functions.
fn made(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        return Ok(());
    }
    Err(napi::Error::new(status.into(), "cannot make the run calls"))
}
