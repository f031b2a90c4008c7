//! Outcomes of acquisitions and runs, told to the facade as completions: shared by the locker's methods (locker.rs)
//! and the direct calls (direct_calls.rs, run_calls.rs).

use crate::completions::{Completion, Completions};
use napi::bindgen_prelude::{spawn, BigInt};
use rustc_hash::FxHashMap;
use snatch_core::{Lease, SnatchError};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Runs waiting for their task to settle, by run id. The facade reports a settled task with `taskDone(id)`:
/// awaiting the task's promise from Rust would cost a persistent reference per call.
pub(crate) type Settling = Arc<Mutex<FxHashMap<u32, oneshot::Sender<()>>>>;

/// Held locks handed to JS, by acquisition id.
pub(crate) type Leases = Arc<Mutex<FxHashMap<u32, Arc<Lease>>>>;

/// Runs `op` on the runtime and queues its completion (or its error) for operation `id` on `completions`.
pub(crate) fn start_op(
    completions: &Arc<Completions>,
    id: u32,
    op: impl Future<Output = Result<Completion, SnatchError>> + Send + 'static,
) {
    let completions = completions.clone();
    spawn(async move {
        completions.push(op.await.unwrap_or_else(|e| Completion::failed(id, &e)));
    });
}

/// The task of run `id` under `lease`, on the runtime: has the facade call it and waits for it to settle, telling
/// the facade if the lease is lost meanwhile.
pub(crate) async fn task_under(id: u32, lease: Arc<Lease>, completions: Arc<Completions>, settling: Settling) {
    let (settled, on_settled) = oneshot::channel();
    settling.lock().expect("settling poisoned").insert(id, settled);
    if !completions.push(Completion::task(id, lease.fence())) {
        // Not called (the JS environment is gone): the run ends at once.
        settling.lock().expect("settling poisoned").remove(&id);
        return;
    }
    tokio::pin!(on_settled);
    tokio::select! {
        _ = &mut on_settled => return,
        lost = lease.ended() => if lost { completions.push(Completion::lost_notice(id)); },
    }
    let _ = on_settled.await;
}

/// The end of run `id`, whose task ran under the lease with `fence`; `lost` if the lease lapsed meanwhile.
pub(crate) fn ran_completion(id: u32, fence: i64, lost: bool) -> Completion {
    Completion { fence: Some(BigInt::from(fence)), lost: Some(lost), ..Completion::done(id) }
}

/// Queues the completion of acquisition `id` from its `result` and, when it got a lease, keeps that as lock `id`.
pub(crate) fn acquired(
    id: u32,
    result: Result<Option<Arc<Lease>>, SnatchError>,
    leases: &Leases,
    completions: &Arc<Completions>,
) {
    match result {
        Ok(Some(lease)) => keep_lock(id, &lease, leases, completions, || {
            completions.push(locked(id, &lease));
        }),
        Ok(None) => {
            completions.push(Completion::done(id));
        }
        Err(e) => {
            completions.push(Completion::failed(id, &e));
        }
    }
}

/// The completion of acquisition `id`, which got `lease`.
pub(crate) fn locked(id: u32, lease: &Lease) -> Completion {
    Completion {
        fence: Some(BigInt::from(lease.fence())),
        token: Some(lease.token().to_owned()),
        ..Completion::done(id)
    }
}

/// Keeps `lease` as lock `id` for `release`, `extend` and `remainingMs`, until it is released or lost, with
/// `announce` telling the facade of the lock in between: the lease is kept before the facade can use the lock, and
/// a loss is told to the facade after the lock.
pub(crate) fn keep_lock(
    id: u32,
    lease: &Arc<Lease>,
    leases: &Leases,
    completions: &Arc<Completions>,
    announce: impl FnOnce(),
) {
    leases.lock().expect("leases poisoned").insert(id, lease.clone());
    announce();
    let (leases, completions) = (leases.clone(), completions.clone());
    lease.on_lost(move || {
        leases.lock().expect("leases poisoned").remove(&id);
        completions.push(Completion::lost_notice(id));
    });
}
