//! The loop socket where libuv polling of a Redis socket is not built (Windows): never ready, so every call goes
//! over the locker's own connection. Same interface as loop_socket.rs.

use napi::Env;
use snatch_core::protocol::direct::session::CallReply;
use snatch_core::protocol::direct::target::DirectTarget;
use snatch_core::Locker;
use std::marker::PhantomData;
use std::time::Duration;

/// Receives replies on the JS thread.
pub(crate) type Handler<C> = Box<dyn Fn(Vec<(C, CallReply)>)>;

/// The sockets of one locker (see loop_socket.rs): none is ever open.
pub(crate) struct SocketSet<C: 'static>(PhantomData<C>);

impl<C: 'static> Default for SocketSet<C> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

/// A socket that is never open.
pub(crate) struct LoopSocket<C: 'static>(PhantomData<C>);

impl<C: 'static> Clone for LoopSocket<C> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

impl<C: 'static> LoopSocket<C> {
    pub(crate) fn new(
        _env: Env,
        _locker: Locker,
        _target: DirectTarget,
        _timeout: Duration,
        _handler: Handler<C>,
        _set: std::rc::Rc<SocketSet<C>>,
    ) -> Self {
        Self(PhantomData)
    }

    pub(crate) fn ready(&self) -> bool {
        false
    }

    pub(crate) fn send(&self, call: C) -> Result<(), C> {
        Err(call)
    }

    pub(crate) fn close(&self) {}
}
