//! Where a locker's runner lives, on the JS thread: the runner (snatch-core's run/), the direct connection's sockets
//! its calls go on, and the delivery of its outcomes to the facade. Every step of the runner goes through
//! [`Host::step`], which then does what the runner left to do: sends its direct calls (one that cannot go back to the
//! runner), and tells its outcomes. The runner is not borrowed while that happens, so the facade may start the next
//! calls from its delivery, and a socket may hand its failed calls back while sending.

use crate::delivery::Delivery;
use crate::direct_sockets::DirectSockets;
use snatch_core::{Output, Runner};
use std::cell::{Cell, RefCell};

/// A locker's runner, sockets and delivery.
pub(crate) struct Host {
    pub(crate) runner: RefCell<Runner>,
    pub(crate) sockets: DirectSockets,
    pub(crate) delivery: Delivery,
    /// An output to reuse, with the room its lists grew to: a step does not allocate them again.
    spare: Cell<Option<Output>>,
}

impl Host {
    pub(crate) fn new(runner: Runner, sockets: DirectSockets, delivery: Delivery) -> Self {
        Self { runner: RefCell::new(runner), sockets, delivery, spare: Cell::default() }
    }

    /// Runs `step` on the runner, then does what it left to do.
    pub(crate) fn step<T>(&self, step: impl FnOnce(&mut Runner, &mut Output) -> T) -> T {
        // A step made while delivering another's outcomes finds no spare and makes its own.
        let mut out = self.spare.take().unwrap_or_default();
        let result = step(&mut self.runner.borrow_mut(), &mut out);
        self.finish(&mut out);
        self.spare.set(Some(out));
        result
    }

    /// Sends the calls of `out` (those no socket takes now go back to the runner, which makes them on the locker's
    /// own connection) and tells its outcomes, leaving both lists empty.
    fn finish(&self, out: &mut Output) {
        let mut calls = std::mem::take(&mut out.calls);
        for call in calls.drain(..) {
            if let Err(call) = self.sockets.send(call) {
                self.runner.borrow_mut().unsent(call, out);
            }
        }
        out.calls = calls;
        self.delivery.deliver(&mut out.told);
    }
}

impl Drop for Host {
    /// The locker is gone (collected, or its JS environment torn down): every lock held for it is given back and it
    /// closes.
    fn drop(&mut self) {
        self.runner.get_mut().abandon();
    }
}
