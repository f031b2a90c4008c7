//! The N-API calls napi-rs has no safe form of, behind safe typed ones: calls of JS functions in a callback scope
//! ([`Caller`]), plain JS functions with positional arguments ([`function`]), and throwing an error with its own code.

use napi::bindgen_prelude::{FnArgs, FromNapiValue, Function, FunctionRef, JsValuesTupleIntoVec, ToNapiValue};
use napi::{sys, Env, JsValue};
use std::ffi::{c_void, CStr};
use std::ptr;

/// An argument of a call of a JS function.
pub(crate) enum Arg {
    Undefined,
    Uint(u32),
    /// A BigInt.
    BigInt(i64),
    Bool(bool),
    Text(String),
    /// A value of a type napi-rs converts (an object of the binding's).
    Value(Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value>>),
}

impl Arg {
    /// `value`, converted when the call is made.
    pub(crate) fn of<T: ToNapiValue + 'static>(value: T) -> Self {
        // SAFETY: napi-rs's conversion, called by `Caller::call_each` on the JS thread of the env it passes, inside a
        // handle scope.
        Self::Value(Box::new(move |env| unsafe { T::to_napi_value(env, value) }))
    }

    /// The value, made in `env`; `None` when N-API could not make it (an exception may be pending).
    // SAFETY: callers are on the JS thread of `env`, inside a handle scope.
    unsafe fn make(self, env: sys::napi_env) -> Option<sys::napi_value> {
        let mut value = ptr::null_mut();
        // SAFETY: per the contract; each call writes `value`, used only once it succeeded.
        let made = unsafe {
            match self {
                Self::Undefined => ok(sys::napi_get_undefined(env, &mut value)),
                Self::Uint(n) => ok(sys::napi_create_uint32(env, n, &mut value)),
                Self::BigInt(n) => ok(sys::napi_create_bigint_int64(env, n, &mut value)),
                Self::Bool(b) => ok(sys::napi_get_boolean(env, b, &mut value)),
                Self::Text(text) => {
                    ok(sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut value))
                }
                Self::Value(make) => return make(env).ok(),
            }
        };
        made.then_some(value)
    }
}

/// Calls JS functions from a loop callback the way node calls JS from I/O: inside a handle scope and in one callback
/// scope of an async resource of its own, so that the promise reactions the calls cause run before the loop goes on.
pub(crate) struct Caller {
    env: sys::napi_env,
    /// The async resource (a reference to an empty object) and its context.
    resource: sys::napi_ref,
    async_context: sys::napi_async_context,
}

impl Caller {
    /// A caller in `env` whose async resource is named `name`; an error when N-API does not make it (nothing is left
    /// of it then). On the JS thread of `env`.
    pub(crate) fn new(env: &Env, name: &CStr) -> napi::Result<Self> {
        let raw = env.raw();
        let (mut object, mut name_value, mut async_context, mut resource) =
            (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: on the JS thread of `env`, inside its handle scope (a call's); each call writes its last argument,
        // and what it wrote is used only once it succeeded.
        unsafe {
            made(sys::napi_create_object(raw, &mut object), "object")?;
            made(sys::napi_create_string_utf8(raw, name.as_ptr(), -1, &mut name_value), "name")?;
            made(sys::napi_async_init(raw, object, name_value, &mut async_context), "async context")?;
            if let Err(e) = made(sys::napi_create_reference(raw, object, 1, &mut resource), "reference") {
                // Fails only for a context N-API did not make: nothing to do about the status.
                sys::napi_async_destroy(raw, async_context);
                return Err(e);
            }
        }
        Ok(Self { env: raw, resource, async_context })
    }

    /// Calls `function` with each list of arguments of `calls`, in order (nothing when there are none). An exception a
    /// call throws is reported as uncaught, as for a callback from node itself; so is one left by N-API failing to
    /// make a call's arguments, that call being skipped. On the JS thread of the caller's env.
    pub(crate) fn call_each<A: JsValuesTupleIntoVec, R, const N: usize>(
        &self,
        function: &FunctionRef<A, R>,
        calls: impl IntoIterator<Item = [Arg; N]>,
    ) {
        let mut calls = calls.into_iter().peekable();
        if calls.peek().is_none() {
            return;
        }
        let env = self.env;
        let mut handle_scope = ptr::null_mut();
        // SAFETY: on the JS thread of `env` (the contract); the scope is closed below, innermost again by then.
        if !ok(unsafe { sys::napi_open_handle_scope(env, &mut handle_scope) }) {
            // No JS value can be made: nothing can hear of the calls.
            return;
        }
        let handle = Env::from_raw(env);
        if let Ok(function) = function.borrow_back(&handle) {
            // SAFETY: on the JS thread of `env`, inside the handle scope; `function` is of `env`.
            unsafe { self.call_in_scope(function.raw(), calls) };
        }
        // SAFETY: the scope opened above. Closing fails only for one that is not the innermost: nothing to do about the
        // status.
        unsafe { sys::napi_close_handle_scope(env, handle_scope) };
    }

    /// [`Caller::call_each`] inside its handle scope.
    // SAFETY: callers are on the JS thread of `self.env`, inside a handle scope, with a function of that env.
    unsafe fn call_in_scope<const N: usize>(&self, function: sys::napi_value, calls: impl Iterator<Item = [Arg; N]>) {
        let env = self.env;
        let (mut resource, mut scope, mut receiver) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        // SAFETY: per the contract; `self.resource` and `self.async_context` live as long as `self`. Each call writes
        // its last argument, and what it wrote is used only once it succeeded: a value that was not made is never
        // passed on.
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
            for args in calls {
                let mut values = [receiver; N];
                let mut all = true;
                for (value, arg) in values.iter_mut().zip(args) {
                    match arg.make(env) {
                        Some(made) => *value = made,
                        None => all = false,
                    }
                }
                let mut result = ptr::null_mut();
                if !all || !ok(sys::napi_call_function(env, receiver, function, N, values.as_ptr(), &mut result)) {
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

impl Drop for Caller {
    fn drop(&mut self) {
        // SAFETY: dropped on the JS thread of `env` (with its owner), before the environment is gone; both were made
        // by `new`. They fail only for what N-API did not make: nothing to do about the statuses.
        unsafe {
            sys::napi_async_destroy(self.env, self.async_context);
            sys::napi_delete_reference(self.env, self.resource);
        }
    }
}

/// Throws `error` in `env`, its code the error's status (as napi-rs throws a returned error); returns what the call
/// then fails with, which leaves that exception standing. On the JS thread of `env`, within a call from JS.
pub(crate) fn throw<S: AsRef<str>>(env: &Env, error: napi::Error<S>) -> napi::Error {
    // SAFETY: an `Env` is handed to a call on its own JS thread only, and this runs within that call.
    unsafe { napi::JsError::from(error).throw_into(env.raw()) };
    napi::Error::from_status(napi::Status::PendingException)
}

/// One argument of a plain function ([`function`]), read from the JS value.
pub(crate) trait FromArg: Sized {
    /// The value; the reason when it is of the wrong type.
    // SAFETY: callers pass a value of `env`, on its JS thread, inside a handle scope (a call's).
    unsafe fn from_arg(env: sys::napi_env, value: sys::napi_value) -> Result<Self, String>;
}

impl<T: FromNapiValue> FromArg for T {
    unsafe fn from_arg(env: sys::napi_env, value: sys::napi_value) -> Result<Self, String> {
        // SAFETY: per the contract, which napi-rs's conversion has too.
        unsafe { T::from_napi_value(env, value) }.map_err(|e| format!("an argument of the wrong type ({e})"))
    }
}

/// The positional arguments of a plain function: a tuple of [`FromArg`]s.
pub(crate) trait Args: Sized {
    /// How many.
    const LEN: usize;
    /// Reads them from `argv` (`LEN` values, `undefined` for those not passed).
    // SAFETY: callers pass `LEN` values of `env`, on its JS thread, inside a handle scope (a call's).
    unsafe fn read(env: sys::napi_env, argv: &[sys::napi_value]) -> Result<Self, String>;
}

macro_rules! args {
    ($len:literal: $($name:ident $at:literal),+) => {
        impl<$($name: FromArg),+> Args for ($($name,)+) {
            const LEN: usize = $len;
            unsafe fn read(env: sys::napi_env, argv: &[sys::napi_value]) -> Result<Self, String> {
                // SAFETY: per the contract.
                Ok(($(unsafe { $name::from_arg(env, argv[$at]) }?,)+))
            }
        }
    };
}
args!(1: A 0);
args!(2: A 0, B 1);
args!(3: A 0, B 1, C 2);
args!(5: A 0, B 1, C 2, D 3, E 4);
args!(8: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// The most arguments a plain function takes.
const MAX_ARGS: usize = 8;

/// What a call of a plain function does with its data and the arguments read (or why they could not be); an error it
/// returns is thrown.
pub(crate) type PlainCall<A, D, S> = fn(&D, Result<A, String>) -> Result<(), napi::Error<S>>;

/// What a plain function keeps: its data, and what a call does.
struct Plain<A, D, S: AsRef<str>> {
    data: D,
    call: PlainCall<A, D, S>,
}

/// A plain JS function named `name` that calls `call` with `data` and its arguments, typed `A` (bad ones give `call`
/// the reason); an error `call` returns is thrown. Cheaper to call than a napi-rs function or method, which track
/// their arguments' and receiver's borrows (bench/README.md, profile step 23). `data` lives until the function is
/// collected.
pub(crate) fn function<'env, A: Args + 'static, D: 'static, S: AsRef<str> + 'static>(
    env: &'env Env,
    name: &CStr,
    data: D,
    call: PlainCall<A, D, S>,
) -> napi::Result<Function<'env, FnArgs<A>, ()>>
where
    FnArgs<A>: JsValuesTupleIntoVec,
{
    assert!(A::LEN <= MAX_ARGS, "at most {MAX_ARGS} arguments");
    let raw = env.raw();
    let plain = Box::into_raw(Box::new(Plain { data, call })).cast::<c_void>();
    let mut function = ptr::null_mut();
    // SAFETY: on the JS thread of `env`, inside a call's handle scope; every pointer passed is valid for the call. The
    // box is freed by the finalizer once registered, else here.
    unsafe {
        let created = made(
            sys::napi_create_function(raw, name.as_ptr(), -1, Some(trampoline::<A, D, S>), plain, &mut function),
            "function",
        )
        .and_then(|()| {
            let finalize = Some(drop_plain::<A, D, S> as unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void));
            made(sys::napi_add_finalizer(raw, function, plain, finalize, ptr::null_mut(), ptr::null_mut()), "finalizer")
        });
        if let Err(e) = created {
            drop_plain::<A, D, S>(raw, plain, ptr::null_mut());
            return Err(e);
        }
        Function::from_napi_value(raw, function)
    }
}

/// The N-API callback of every plain function: reads the arguments, makes the call, throws its error.
// SAFETY: N-API calls it on the JS thread of `env`, with the `info` of a call of a function `function` made with a
// `Plain<A, D, S>` as data.
unsafe extern "C" fn trampoline<A: Args, D, S: AsRef<str>>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let (mut argc, mut argv, mut data) = (A::LEN, [ptr::null_mut(); MAX_ARGS], ptr::null_mut());
    // SAFETY: per the contract; `argv` has room for `argc` values (`function` checked `A::LEN`), the ones not passed
    // set to `undefined`.
    let status = unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), &mut data) };
    if status != sys::Status::napi_ok || data.is_null() {
        // An exception is pending, if anything.
        return ptr::null_mut();
    }
    // SAFETY: the data of a function made by `function`, alive until the function is collected.
    let plain = unsafe { &*data.cast::<Plain<A, D, S>>() };
    // SAFETY: `A::LEN` values of this call, on its thread, inside its handle scope.
    let args = unsafe { A::read(env, &argv[..A::LEN]) };
    if let Err(error) = (plain.call)(&plain.data, args) {
        throw(&Env::from_raw(env), error);
    }
    ptr::null_mut()
}

/// Frees a plain function's data when the function is collected.
// SAFETY: node calls it once, as the finalizer `function` registered with the `data` it leaked; `function` calls it
// instead when the registration failed.
unsafe extern "C" fn drop_plain<A, D, S: AsRef<str>>(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the box `function` leaked for this function, dropped once.
    drop(unsafe { Box::from_raw(data.cast::<Plain<A, D, S>>()) });
}

/// Whether an N-API call succeeded.
fn ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}

/// An error unless `status` is `napi_ok`: N-API did not make `what`.
fn made(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if ok(status) {
        return Ok(());
    }
    Err(napi::Error::new(status.into(), format!("N-API could not make the {what}")))
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
