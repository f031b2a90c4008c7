//! The loop sockets of one locker's direct calls (loop_socket.rs): one for a single server; on a Redis Cluster one
//! per master, a call going to the master of its key's slot. The slot map is fetched when first needed, and again
//! (at most once a second) after a call on a master had to go over the locker's own connection: a slot moved, a
//! master failed over, a node is new. Until a map is in, and for slots without an open socket, calls take the
//! locker's own connection.

use crate::loop_socket::{Handler, LoopSocket};
use napi::bindgen_prelude::spawn;
use napi::Env;
use snatch_core::protocol::direct::commands::DirectCall;
use snatch_core::protocol::direct::session::CallReply;
use snatch_core::protocol::direct::target::{ClusterMap, DirectTarget};
use snatch_core::{Call, DirectRoute, Locker, SnatchError};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after a fetch of the slot map another may start.
const REFETCH_AFTER: Duration = Duration::from_secs(1);

/// A slot map fetched on the runtime, for the JS thread to take.
type Fetched = Arc<Mutex<Option<Result<Option<ClusterMap>, SnatchError>>>>;

/// The sockets of one locker's direct calls.
pub(crate) struct DirectSockets<C: DirectCall + 'static> {
    env: Env,
    locker: Locker,
    timeout: Duration,
    handler: Rc<Handler<C>>,
    kind: Kind<C>,
    /// Set when a call needed the locker's own connection: on a cluster, the slot map may be out of date.
    stale: Arc<AtomicBool>,
}

enum Kind<C: DirectCall + 'static> {
    /// No direct calls (the runtime cannot poll sockets for us).
    None,
    Server(Rc<LoopSocket<C>>),
    Cluster(RefCell<Masters<C>>),
}

/// The sockets of a cluster's masters, by the slot map they were made for.
struct Masters<C: DirectCall + 'static> {
    map: Option<ClusterMap>,
    /// One per master of `map`, in its order.
    sockets: Vec<Rc<LoopSocket<C>>>,
    /// A fetch of the slot map under way.
    fetching: Option<Fetched>,
    /// No fetch starts before this.
    fetch_after: Option<Instant>,
}

impl<C: DirectCall + 'static> DirectSockets<C> {
    /// The sockets for `locker`'s direct calls, with `timeout` as each call's deadline, replies going to `handler`.
    /// Nothing opens yet. `stale` is set by whoever finishes a call on the locker's own connection.
    pub(crate) fn new(
        env: Env,
        locker: &Locker,
        timeout: Duration,
        handler: Handler<C>,
        stale: Arc<AtomicBool>,
    ) -> Self {
        let handler = Rc::new(handler);
        let kind = match locker.direct_route() {
            None => Kind::None,
            Some(DirectRoute::Cluster) => {
                let masters = Masters { map: None, sockets: Vec::new(), fetching: None, fetch_after: None };
                Kind::Cluster(RefCell::new(masters))
            }
            Some(DirectRoute::Server) => {
                Kind::Server(Rc::new(LoopSocket::new(env, DirectTarget::Server, timeout, forward(&handler))))
            }
        };
        Self { env, locker: locker.clone(), timeout, handler, kind, stale }
    }

    /// The socket for a call on the slot `slot()` gives (asked on a cluster only), when one is open; otherwise starts
    /// what it takes to have one (opening the socket, fetching the slot map) and the call takes the locker's own
    /// connection.
    fn for_slot(&self, slot: impl FnOnce() -> u16) -> Option<Rc<LoopSocket<C>>> {
        let locker = &self.locker;
        let masters = match &self.kind {
            Kind::None => return None,
            Kind::Server(socket) => return socket.ready(locker).then(|| socket.clone()),
            Kind::Cluster(masters) => masters,
        };
        let mut masters = masters.borrow_mut();
        self.refresh(&mut masters, locker);
        let index = masters.map.as_ref()?.master_of(slot())?;
        let socket = masters.sockets.get(index)?;
        socket.ready(locker).then(|| socket.clone())
    }

    /// Takes a fetched slot map in (new sockets for it; the old ones close once their calls are answered), or starts
    /// fetching one when there is none or it may be out of date.
    fn refresh(&self, masters: &mut Masters<C>, locker: &Locker) {
        if let Some(fetched) = masters.fetching.as_ref().and_then(|f| f.lock().expect("slot map poisoned").take()) {
            masters.fetching = None;
            // The same map keeps its sockets (a call may have left the direct path for another reason: a counter
            // to raise, a script to load).
            if let Ok(Some(map)) = fetched.map(|map| map.filter(|map| masters.map.as_ref() != Some(map))) {
                let sockets = (0..map.masters.len())
                    .map(|index| {
                        Rc::new(LoopSocket::new(self.env, map.target(index), self.timeout, forward(&self.handler)))
                    })
                    .collect();
                for old in std::mem::replace(&mut masters.sockets, sockets) {
                    old.close();
                }
                masters.map = Some(map);
            }
        }
        let wanted = masters.map.is_none() || self.stale.load(Ordering::SeqCst);
        let due = masters.fetch_after.is_none_or(|at| Instant::now() >= at);
        if !wanted || !due || masters.fetching.is_some() || locker.is_closed() {
            return;
        }
        self.stale.store(false, Ordering::SeqCst);
        masters.fetch_after = Some(Instant::now() + REFETCH_AFTER);
        let (fetched, locker) = (Fetched::default(), locker.clone());
        masters.fetching = Some(fetched.clone());
        spawn(async move {
            let map = snatch_core::direct_cluster_map(&locker).await;
            *fetched.lock().expect("slot map poisoned") = Some(map);
        });
    }

    /// The locker is closing: every socket closes once its calls are answered.
    pub(crate) fn close(&self) {
        match &self.kind {
            Kind::None => {}
            Kind::Server(socket) => socket.close(),
            Kind::Cluster(masters) => masters.borrow().sockets.iter().for_each(|socket| socket.close()),
        }
    }
}

/// A handler for one more socket that passes the replies on to `handler`.
fn forward<C: 'static>(handler: &Rc<Handler<C>>) -> Handler<C> {
    let handler = handler.clone();
    Box::new(move |replies: Vec<(C, CallReply)>| handler(replies))
}

impl DirectSockets<Call> {
    /// Sends `call` on the socket of its slot; hands it back when none is open now.
    #[allow(clippy::result_large_err, reason = "the call handed back is no error: boxing it would cost every call")]
    pub(crate) fn send(&self, call: Call) -> Result<(), Call> {
        match self.for_slot(|| call.slot()) {
            Some(socket) => socket.send(call),
            None => Err(call),
        }
    }
}
