//! Which socket each direct call of a locker takes: its one server's, or on a Redis Cluster the socket of the master
//! of the call's slot, by a slot map fetched when first needed and again (at most once a second) after a call had to go
//! over the locker's own connection (a slot moved, a master failed over, a node is new). Until a map is in, and for
//! slots without an open socket, calls take the locker's own connection. The sockets are the caller's (the binding's,
//! on node's event loop): this only picks among them, and says when to make and close them.

use crate::direct::open;
use crate::lock::locker::{DirectRoute, Locker};
use snatch_protocol::direct::target::{ClusterMap, DirectTarget};
use snatch_protocol::SnatchError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// How long after a fetch of the slot map another may start.
const REFETCH_AFTER: Duration = Duration::from_secs(1);

/// A slot map fetched on the runtime, for the routes' thread to take.
type Fetched = Arc<Mutex<Option<Result<Option<ClusterMap>, SnatchError>>>>;

/// A socket of the caller's, as the routes use it.
pub trait RouteSocket {
    /// Whether calls can be sent on it now; when not, it may start opening.
    fn ready(&self) -> bool;
    /// No more calls: it closes once the calls in flight are answered.
    fn close(&self);
}

/// The sockets of one locker's direct calls, and which one each call takes. Dropped, it closes them (once their calls
/// are answered).
pub struct Routes<S: RouteSocket> {
    locker: Locker,
    runtime: Handle,
    /// Makes the socket to a target.
    make: Box<dyn Fn(DirectTarget) -> S>,
    kind: Kind<S>,
    /// Set when a call needed the locker's own connection: on a cluster, the slot map may be out of date.
    stale: Arc<AtomicBool>,
}

enum Kind<S: RouteSocket> {
    /// No direct calls ([`Locker::direct_route`]).
    None,
    Server(S),
    Cluster(Masters<S>),
}

/// The sockets of a cluster's masters, by the slot map they were made for.
struct Masters<S: RouteSocket> {
    map: Option<ClusterMap>,
    /// One per master of `map`, in its order.
    sockets: Vec<S>,
    /// A fetch of the slot map under way.
    fetching: Option<Fetched>,
    /// No fetch starts before this.
    fetch_after: Option<Instant>,
}

impl<S: RouteSocket> Routes<S> {
    /// The routes of `locker`'s direct calls, its sockets made by `make` (none yet); a slot map is fetched on
    /// `runtime`. `stale` is set by whoever finishes a call on the locker's own connection (the runner).
    pub fn new(
        locker: &Locker,
        runtime: Handle,
        stale: Arc<AtomicBool>,
        make: impl Fn(DirectTarget) -> S + 'static,
    ) -> Self {
        let kind = match locker.direct_route() {
            None => Kind::None,
            Some(DirectRoute::Server) => Kind::Server(make(DirectTarget::Server)),
            Some(DirectRoute::Cluster) => {
                Kind::Cluster(Masters { map: None, sockets: Vec::new(), fetching: None, fetch_after: None })
            }
        };
        Self { locker: locker.clone(), runtime, make: Box::new(make), kind, stale }
    }

    /// The socket a call on the slot `slot()` gives (asked on a cluster only) takes, when one is open; otherwise starts
    /// what it takes to have one (opening the socket, fetching the slot map) and the call takes the locker's own
    /// connection.
    pub fn socket(&mut self, slot: impl FnOnce() -> u16) -> Option<&S> {
        match &mut self.kind {
            Kind::None => None,
            Kind::Server(socket) => socket.ready().then_some(&*socket),
            Kind::Cluster(masters) => {
                refresh(masters, &self.locker, &self.runtime, &self.stale, &*self.make);
                let index = masters.map.as_ref()?.master_of(slot())?;
                let socket = masters.sockets.get(index)?;
                socket.ready().then_some(socket)
            }
        }
    }

    /// The locker is closing: every socket closes once its calls are answered.
    pub fn close(&self) {
        match &self.kind {
            Kind::None => {}
            Kind::Server(socket) => socket.close(),
            Kind::Cluster(masters) => masters.sockets.iter().for_each(RouteSocket::close),
        }
    }
}

impl<S: RouteSocket> Drop for Routes<S> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Takes a fetched slot map in (new sockets for it; the old ones close once their calls are answered), or starts
/// fetching one when there is none or it may be out of date.
fn refresh<S: RouteSocket>(
    masters: &mut Masters<S>,
    locker: &Locker,
    runtime: &Handle,
    stale: &AtomicBool,
    make: &dyn Fn(DirectTarget) -> S,
) {
    if let Some(fetched) = masters.fetching.as_ref().and_then(|f| f.lock().expect("slot map poisoned").take()) {
        masters.fetching = None;
        // The same map keeps its sockets (a call may have left the direct path for another reason: a counter to
        // raise, a script to load).
        if let Ok(Some(map)) = fetched.map(|map| map.filter(|map| masters.map.as_ref() != Some(map))) {
            let sockets = (0..map.masters.len()).map(|index| make(map.target(index))).collect();
            for old in std::mem::replace(&mut masters.sockets, sockets) {
                old.close();
            }
            masters.map = Some(map);
        }
    }
    let wanted = masters.map.is_none() || stale.load(Ordering::SeqCst);
    let due = masters.fetch_after.is_none_or(|at| Instant::now() >= at);
    if !wanted || !due || masters.fetching.is_some() || locker.is_closed() {
        return;
    }
    stale.store(false, Ordering::SeqCst);
    masters.fetch_after = Some(Instant::now() + REFETCH_AFTER);
    let (fetched, locker) = (Fetched::default(), locker.clone());
    masters.fetching = Some(fetched.clone());
    runtime.spawn(async move {
        let map = open::cluster_map(&locker).await;
        *fetched.lock().expect("slot map poisoned") = Some(map);
    });
}
