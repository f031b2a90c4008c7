//! A stored schedule's occurrence being dispatched (stored.rs): its first record and the schedule's next tick written
//! in one script, so that neither is without the other.

use crate::schedule::store;
use crate::server::node::Node;
use crate::server::script_call::ScriptCall;
use snatch_protocol::schedule::{Attempt, ScheduleKeys, Write, Written};
use snatch_protocol::scripts::STORED_FIRST_RECORD;
use snatch_protocol::stored::FINISHED_RETENTION;
use snatch_protocol::SnatchError;
use std::time::Duration;
use tokio::sync::oneshot;

/// A stored schedule's next tick after `due` was dispatched (`None`: it is finished, and its keys expire after
/// [`FINISHED_RETENTION`]), written on the version its state was read at (scripts/stored_advance.lua).
pub(crate) struct Advance {
    version: String,
    due: Option<i64>,
    following: Option<i64>,
    /// The occurrence counts towards `limit` (it ran or was missed: not an older one superseded).
    counts: bool,
}

impl Advance {
    pub(crate) fn new(version: Option<String>, due: Option<i64>, following: Option<i64>, counts: bool) -> Self {
        Self { version: version.unwrap_or_default(), due, following, counts }
    }

    /// Its arguments (stored_advance.lua's).
    pub(crate) fn words(&self, call: &mut ScriptCall) {
        call.arg(&self.version);
        call.arg(self.due.map_or_else(String::new, |d| d.to_string()));
        call.arg(self.following.map_or_else(String::new, |f| f.to_string()));
        call.arg(FINISHED_RETENTION.as_millis() as u64).arg(if self.counts { "1" } else { "0" });
    }
}

/// The occurrence being dispatched: its first attempt, told whether its first record was written, and the schedule's
/// next tick, written with that record.
pub(crate) struct Dispatch {
    pub(crate) attempt: Attempt,
    pub(crate) tell: oneshot::Sender<bool>,
    pub(crate) advance: Option<Advance>,
}

/// Writes the dispatched occurrence's first record (`write` of the schedule of `keys`, which keeps `history` records
/// for `keep`, while the locks `held` are held, as [`store::record`] does) and then `advance`, whatever the record
/// came to, in one call to `node`: stored schedules run on one Redis.
pub(crate) async fn first_record(
    node: &Node,
    keys: &ScheduleKeys,
    write: &Write,
    held: &[(&str, &str)],
    (history, keep): (u32, Duration),
    advance: &Advance,
) -> Result<Written, SnatchError> {
    let beside = [keys.triggers.as_str()];
    let mut call = store::record_call(&STORED_FIRST_RECORD, keys, write, (history, keep), true, held, &beside);
    advance.words(&mut call);
    Ok(store::written(node.invoke(call).await?))
}
