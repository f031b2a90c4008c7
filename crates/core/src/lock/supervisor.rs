//! Lease supervision for one locker: a table of the leases it holds, ordered by when each next needs attention
//! (its renewal, or the notice that it is lost), and one task that sleeps until the earliest of them. A lease enters
//! and leaves the table under a mutex, waking that task only when it is due sooner than the task would look, so
//! holding a lock costs neither a task nor a thread wake-up of its own (measured: bench/README.md).

use crate::lock::lease::{Lease, LeaseState};
use crate::lock::stall::Stall;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

/// A lease with auto-extension is renewed every ttl / `RENEW_FRACTION`.
const RENEW_FRACTION: u32 = 3;

/// The lost notice is given this fraction of the ttl before the validity ends.
const NOTICE_FRACTION: u32 = 10;

/// The lost notice is given at most this long before the validity ends.
const MAX_NOTICE: Duration = Duration::from_secs(1);

/// The task looks at the table at least this often, and ends within it once the locker is gone or closed.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The leases of a locker under supervision. Dropping it lets its task end.
pub(crate) struct Supervisor {
    shared: Arc<Shared>,
}

struct Shared {
    table: Mutex<Table>,
    /// Wakes the task early; the task holds it without holding the rest.
    wake: Arc<Notify>,
    /// No lease is renewed while the caller's loop has stalled.
    stall: Arc<Stall>,
}

#[derive(Default)]
struct Table {
    entries: FxHashMap<u64, Entry>,
    /// When each entry not being renewed needs attention next.
    due: BTreeSet<(Instant, u64)>,
    next_id: u64,
    /// When the task looks next, while it sleeps; `None` while it works or before it started.
    sleeping_until: Option<Instant>,
    started: bool,
    closed: bool,
}

struct Entry {
    lease: Arc<Lease>,
    auto_extend: bool,
    renew_at: Instant,
    /// Its place in `due`; `None` while a renewal is under way.
    queued_at: Option<Instant>,
}

impl Entry {
    /// When the entry needs attention next: its renewal, or its lost notice if that comes first.
    fn next_at(&self) -> Instant {
        let lost_at = notice_at(&self.lease);
        if self.auto_extend {
            self.renew_at.min(lost_at)
        } else {
            lost_at
        }
    }
}

/// When `lease` is declared lost unless renewed: [`NOTICE_FRACTION`] of the ttl (at most [`MAX_NOTICE`]) before its
/// validity ends, so that the owner hears of it while the lease still holds. Now, once it is no longer held.
fn notice_at(lease: &Lease) -> Instant {
    match lease.state() {
        LeaseState::Held { valid_until } => valid_until - (lease.ttl() / NOTICE_FRACTION).min(MAX_NOTICE),
        _ => Instant::now(),
    }
}

impl Supervisor {
    pub(crate) fn new(stall: Arc<Stall>) -> Self {
        let table = Mutex::new(Table::default());
        Self { shared: Arc::new(Shared { table, wake: Arc::new(Notify::new()), stall }) }
    }

    /// Supervises `lease` until it ends: renews it every ttl / [`RENEW_FRACTION`] when `auto_extend` and declares
    /// it lost when its validity is about to run out without a renewal (an extension refused is lost at once).
    /// Starts the task on first use, so it must be called within the Tokio runtime.
    pub(crate) fn watch(&self, lease: Arc<Lease>, auto_extend: bool) {
        let renew_at = lease.acquired_at() + lease.ttl() / RENEW_FRACTION;
        let mut entry = Entry { lease: lease.clone(), auto_extend, renew_at, queued_at: None };
        let at = entry.next_at();
        entry.queued_at = Some(at);
        let (id, wake, start) = {
            let mut table = self.shared.table.lock().expect("supervisor poisoned");
            let id = table.next_id;
            table.next_id += 1;
            table.entries.insert(id, entry);
            table.due.insert((at, id));
            let start = !std::mem::replace(&mut table.started, true);
            (id, table.sleeping_until.is_some_and(|t| at < t), start)
        };
        if start {
            tokio::spawn(supervise(Arc::downgrade(&self.shared), self.shared.wake.clone()));
        } else if wake {
            self.shared.wake.notify_one();
        }
        let shared = Arc::downgrade(&self.shared);
        lease.on_end(move || {
            if let Some(shared) = shared.upgrade() {
                shared.leave(id);
            }
        });
    }

    /// Renews `leases` (a set held together) together from now on: each next renewal at the earliest of theirs, so
    /// that they come due in one pass and their extensions go out in one batch per server.
    pub(crate) fn align(&self, leases: &[Arc<Lease>]) {
        let mut table = self.shared.table.lock().expect("supervisor poisoned");
        let Table { entries, due, .. } = &mut *table;
        let mut set: Vec<(u64, &mut Entry)> = entries
            .iter_mut()
            .filter(|(_, entry)| leases.iter().any(|lease| Arc::ptr_eq(lease, &entry.lease)))
            .map(|(id, entry)| (*id, entry))
            .collect();
        let Some(renew_at) = set.iter().map(|(_, entry)| entry.renew_at).min() else { return };
        for (id, entry) in &mut set {
            entry.renew_at = renew_at;
            // One being renewed now is put back in line by its renewal.
            let Some(queued_at) = entry.queued_at else { continue };
            let at = entry.next_at();
            entry.queued_at = Some(at);
            due.remove(&(queued_at, *id));
            due.insert((at, *id));
        }
    }

    /// The leases under supervision (those not yet ended).
    pub(crate) fn leases(&self) -> Vec<Arc<Lease>> {
        let table = self.shared.table.lock().expect("supervisor poisoned");
        table.entries.values().map(|e| e.lease.clone()).collect()
    }

    /// Stops the task; leases still held are no longer renewed.
    pub(crate) fn close(&self) {
        self.shared.table.lock().expect("supervisor poisoned").closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    /// Takes entry `id` out of the table (its lease ended).
    fn leave(&self, id: u64) {
        let mut table = self.table.lock().expect("supervisor poisoned");
        if let Some(Entry { queued_at: Some(at), .. }) = table.entries.remove(&id) {
            table.due.remove(&(at, id));
        }
    }

    /// Puts entry `id` back in line after a renewal, `renew_at` being its next one; not if it ended meanwhile.
    fn requeue(&self, id: u64, renew_at: Instant) {
        let wake = {
            let mut table = self.table.lock().expect("supervisor poisoned");
            let Some(entry) = table.entries.get_mut(&id) else { return };
            entry.renew_at = renew_at;
            let at = entry.next_at();
            entry.queued_at = Some(at);
            table.due.insert((at, id));
            table.sleeping_until.is_some_and(|t| at < t)
        };
        if wake {
            self.wake.notify_one();
        }
    }
}

/// The supervisor's task: attends to the entries that are due, then sleeps until the next one (at most
/// [`IDLE_TICK`]) or until woken. Holds the table only while awake, and ends once the supervisor is dropped or
/// closed.
async fn supervise(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let Some(strong) = shared.upgrade() else { return };
        let now = Instant::now();
        let due = {
            let mut table = strong.table.lock().expect("supervisor poisoned");
            if table.closed {
                return;
            }
            table.sleeping_until = None;
            let mut due = Vec::new();
            while let Some(&(at, id)) = table.due.first().filter(|(at, _)| *at <= now) {
                table.due.remove(&(at, id));
                let entry = table.entries.get_mut(&id).expect("queued entries are in the table");
                entry.queued_at = None;
                due.push((id, entry.lease.clone(), entry.auto_extend, entry.renew_at));
            }
            due
        };
        for (id, lease, auto_extend, renew_at) in due {
            attend(&strong, id, lease, auto_extend, renew_at, now);
        }
        // Decided under the same lock that `watch` checks, so a lease due sooner than this wakes the task.
        let sleep_to = {
            let mut table = strong.table.lock().expect("supervisor poisoned");
            let limit = Instant::now() + IDLE_TICK;
            let sleep_to = table.due.first().map_or(limit, |(at, _)| (*at).min(limit));
            table.sleeping_until = Some(sleep_to);
            sleep_to
        };
        drop(strong);
        tokio::select! {
            () = sleep_until(sleep_to) => {}
            () = wake.notified() => {}
        }
    }
}

/// Entry `id` is due at `now`: declares its lease lost, starts its renewal, or puts it back in line (its lease
/// was extended by its owner meanwhile).
fn attend(shared: &Arc<Shared>, id: u64, lease: Arc<Lease>, auto_extend: bool, renew_at: Instant, now: Instant) {
    let lost_at = notice_at(&lease);
    if now >= lost_at {
        lease.mark_lost();
    } else if auto_extend && now >= renew_at && shared.stall.stalled() {
        // The caller's loop has not turned within maxStall: no renewal, and the lease lapses (told as a stall) unless
        // the loop turns before its notice.
        lease.mark_stalled();
        shared.requeue(id, now + (lease.ttl() / 10).clamp(Duration::from_millis(1), Duration::from_millis(250)));
    } else if auto_extend && now >= renew_at {
        // In a task of its own, so that one slow server does not hold up the other leases.
        let (shared, period) = (Arc::downgrade(shared), lease.ttl() / RENEW_FRACTION);
        let retry = (lease.ttl() / 10).clamp(Duration::from_millis(1), Duration::from_millis(250));
        tokio::spawn(async move {
            let started = Instant::now();
            let extend = lease.extend(None);
            tokio::pin!(extend);
            let next = tokio::select! {
                result = &mut extend => match result {
                    Ok(_) => started + period,
                    Err(_) => Instant::now() + retry,
                },
                () = sleep_until(lost_at) => {
                    lease.mark_lost();
                    // Still awaited: if Redis applies the extension now, `extend` gives the key back.
                    let _ = extend.await;
                    return;
                }
            };
            if let Some(shared) = shared.upgrade() {
                shared.requeue(id, next);
            }
        });
    } else {
        shared.requeue(id, renew_at);
    }
}
