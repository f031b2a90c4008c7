//! The direct sockets of one locker (loop_socket.rs), one per target the core's `Routes` picks: the one server, or
//! each master of a Redis Cluster, a call going to the master of its key's slot.

use crate::loop_socket::{Handler, LoopSocket, SocketSet};
use napi::Env;
use snatch_core::{Call, Locker, RouteSocket, Routes};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::runtime::Handle;

/// The sockets of one locker's direct calls.
pub(crate) struct DirectSockets {
    routes: RefCell<Routes<LoopSocket<Call>>>,
}

impl RouteSocket for LoopSocket<Call> {
    fn ready(&self) -> bool {
        LoopSocket::ready(self)
    }

    fn close(&self) {
        LoopSocket::close(self)
    }
}

impl DirectSockets {
    /// The sockets for `locker`'s direct calls, on the loop of `env`, replies going to `handler`; a cluster's slot map
    /// is fetched on `runtime`. Nothing opens yet. `stale` is set by whoever finishes a call on the locker's own
    /// connection.
    pub(crate) fn new(
        env: Env,
        locker: &Locker,
        runtime: Handle,
        handler: Handler<Call>,
        stale: Arc<AtomicBool>,
    ) -> Self {
        let (handler, timeout, opener) = (Rc::new(handler), locker.config().command_timeout, locker.clone());
        let set = Rc::new(SocketSet::default());
        let routes = Routes::new(locker, runtime, stale, move |target| {
            let handler = handler.clone();
            LoopSocket::new(
                env,
                opener.clone(),
                target,
                timeout,
                Box::new(move |replies| handler(replies)),
                set.clone(),
            )
        });
        Self { routes: RefCell::new(routes) }
    }

    /// Sends `call` on the socket of its slot; hands it back when none is open now.
    #[allow(clippy::result_large_err, reason = "the call handed back is no error: boxing it would cost every call")]
    pub(crate) fn send(&self, call: Call) -> Result<(), Call> {
        // Taken out of the routes before sending: a socket that fails on the write hands its calls back at once.
        let socket = self.routes.borrow_mut().socket(|| call.slot()).cloned();
        match socket {
            Some(socket) => socket.send(call),
            None => Err(call),
        }
    }

    /// The locker is closing: every socket closes once its calls are answered.
    pub(crate) fn close(&self) {
        self.routes.borrow().close();
    }
}
