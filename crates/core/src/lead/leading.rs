//! Who leads a name, read from Redis, and a term's beginning and end noted there for the observers (snatch-protocol's
//! lead.rs says the names and what they hold).

use crate::lock::locker::Locker;
use crate::server::script_call::ScriptCall;
use snatch_protocol::lead::{term, LeaderKeys, Leading};
use snatch_protocol::scripts::{CLUSTER, LEADER_NOTE, LEADER_READ};
use snatch_protocol::SnatchError;

/// Who leads the leadership of `keys`: the leader a majority of the nodes holds (on Redlock), `None` without one.
pub(crate) async fn read(locker: &Locker, keys: &LeaderKeys) -> Result<Option<Leading>, SnatchError> {
    let mut call = ScriptCall::new(&LEADER_READ, 2);
    call.arg(&keys.lock.lock).arg(&keys.term);
    let answers: Vec<(String, i64, String)> = locker.nodes().every(call).await?;
    let quorum = locker.nodes().quorum();
    let read: Vec<Leading> = answers.iter().filter_map(|(value, pttl, term)| Leading::of(value, *pttl, term)).collect();
    // The leader a majority holds; its term from any of them (a note reaches the nodes one after another).
    let agreed =
        read.iter().find(|leading| read.iter().filter(|other| other.leader == leading.leader).count() >= quorum);
    Ok(agreed.map(|leading| {
        let same = || read.iter().filter(|other| other.leader == leading.leader);
        Leading {
            leader: leading.leader.clone(),
            term: same().filter_map(|other| other.term).max(),
            ttl_ms: same().map(|other| other.ttl_ms).min().unwrap_or(0),
        }
    }))
}

/// Notes on every node that the term of `token` under `fence` began (`Some`) or that the term ended (`None`), and tells
/// the observers. A note that fails changes nothing for the leader: its observers see the change at the lease's end.
pub(crate) async fn note(locker: &Locker, keys: &LeaderKeys, began: Option<(&str, i64)>) {
    let mut call = ScriptCall::new(&LEADER_NOTE, 1);
    call.arg(&keys.term).arg(&keys.channel);
    call.arg(began.map_or_else(String::new, |(token, fence)| term(token, fence)));
    call.arg(locker.config().fence_ttl.as_millis() as u64);
    if locker.one_slot() {
        call.arg(CLUSTER);
    }
    let _ = locker.nodes().every::<i64>(call).await;
}
