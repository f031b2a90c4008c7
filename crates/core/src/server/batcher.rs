//! Script calls (and a few plain commands) of concurrent operations on one server, sent together. Callers queue their call; one flusher task
//! per server sends everything queued as one pipeline: one write and one read of the replies for the whole batch,
//! for us and for Redis. While batches are in flight, the flusher first lets the other ready tasks have their turn
//! so that their calls join the batch; a call that finds nothing in flight goes out at once. Several batches can be
//! in flight at once.

use crate::server::connection::{is_dropped, is_read_only, Connection, Link};
use crate::server::script_call::{as_eval, ScriptCall};
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::{Cmd, ErrorKind, Pipeline, RedisResult, ServerErrorKind, Value};
use snatch_protocol::scripts::Script;
use snatch_protocol::SnatchError;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::task::AbortHandle;

/// Where a queued call's reply goes.
type Reply = oneshot::Sender<Result<Value, SnatchError>>;

/// A queued command: a script call's EVALSHA with its script, or a plain command (`None`).
type Queued = (Cmd, Option<&'static Script>, Reply);

/// Calls waiting for the flusher.
#[derive(Default)]
struct Queue {
    calls: Mutex<Vec<Queued>>,
    /// Signalled when a call is queued into an empty queue.
    filled: Notify,
}

/// The batching front of one server's connection.
pub(crate) struct Batcher {
    queue: Arc<Queue>,
    connection: Arc<Connection>,
    /// The flusher task, started by the first call and aborted when the batcher is dropped.
    flusher: OnceLock<AbortHandle>,
}

impl Batcher {
    pub(crate) fn new(connection: Arc<Connection>) -> Self {
        Self { queue: Arc::default(), connection, flusher: OnceLock::new() }
    }

    /// Runs `call`: its reply, or the error of its batch. Batches finish within the command timeout.
    pub(crate) async fn call(&self, call: ScriptCall) -> Result<Value, SnatchError> {
        self.queue(call.cmd, Some(call.script)).await
    }

    /// Runs `command`, not a script's (the server's own compare-and-delete, say), as [`Batcher::call`] runs a call.
    pub(crate) async fn command(&self, command: Cmd) -> Result<Value, SnatchError> {
        self.queue(command, None).await
    }

    async fn queue(&self, cmd: Cmd, script: Option<&'static Script>) -> Result<Value, SnatchError> {
        self.flusher.get_or_init(|| tokio::spawn(flush(self.queue.clone(), self.connection.clone())).abort_handle());
        let (reply, replied) = oneshot::channel();
        let first = {
            let mut calls = self.queue.calls.lock().expect("call queue poisoned");
            calls.push((cmd, script, reply));
            calls.len() == 1
        };
        if first {
            self.queue.filled.notify_one();
        }
        replied.await.unwrap_or(Err(SnatchError::Closed))
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        if let Some(flusher) = self.flusher.get() {
            flusher.abort();
        }
    }
}

/// The flusher: takes what is queued once the other ready tasks have run, and sends it as one batch.
async fn flush(queue: Arc<Queue>, connection: Arc<Connection>) {
    let mut in_flight = FuturesUnordered::new();
    loop {
        tokio::select! {
            () = queue.filled.notified() => {
                if !in_flight.is_empty() {
                    // Redis is busy with earlier batches anyway: let the tasks that are ready queue their calls
                    // too. A call that finds nothing in flight goes out at once.
                    tokio::task::yield_now().await;
                }
                let calls = std::mem::take(&mut *queue.calls.lock().expect("call queue poisoned"));
                in_flight.push(send(connection.clone(), calls));
            }
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
        }
    }
}

/// Sends one batch within the command timeout and hands each caller its reply. Calls whose caller stopped
/// waiting (its operation timed out or was dropped) are not sent.
async fn send(connection: Arc<Connection>, calls: Vec<Queued>) {
    let mut pipe = Pipeline::with_capacity(calls.len());
    pipe.ignore_errors();
    let mut scripts = Vec::with_capacity(calls.len());
    let mut replies = Vec::with_capacity(calls.len());
    for (cmd, script, reply) in calls.into_iter().filter(|(_, _, reply)| !reply.is_closed()) {
        pipe.add_command(cmd);
        scripts.push(script);
        replies.push(reply);
    }
    if replies.is_empty() {
        return;
    }
    let results = tokio::time::timeout(connection.timeout(), exchange(&connection, &pipe, &scripts))
        .await
        .unwrap_or_else(|_| Err(connection.timed_out()))
        .map(|(results, _)| results);
    match results {
        Ok(values) => {
            for (reply, value) in replies.into_iter().zip(values) {
                let _ = reply.send(value.map_err(|e| connection.failed(&e)));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// Runs `pipe` (one script call per command, of `scripts`, or a plain command where `None`). A connection found dropped (say, after a Redis
/// restart) is opened again and the batch sent once more; a server found turned replica (a master demoted by a
/// failover) has the connection opened anew for the next batch. Calls of a script the server did not have are sent
/// again as EVAL, and, on a cluster, calls refused while their slot migrates (TRYAGAIN) again after a short pause,
/// until the caller's timeout. All our scripts are safe to repeat with the same token.
async fn exchange(
    connection: &Connection,
    pipe: &Pipeline,
    scripts: &[Option<&'static Script>],
) -> Result<(Vec<RedisResult<Value>>, Link), SnatchError> {
    let mut link = connection.get().await?;
    let mut results = match link.send_each(pipe).await {
        Err(e) if is_dropped(&e) => {
            connection.reset();
            link = connection.get().await?;
            link.send_each(pipe).await
        }
        results => results,
    }
    .map_err(|e| {
        if is_dropped(&e) {
            connection.reset();
        }
        connection.failed(&e)
    })?;
    if results.iter().any(is_read_only) {
        connection.reset();
    }

    let cmds: Vec<&Cmd> = pipe.cmd_iter().collect();
    let mut pause = TRY_AGAIN_PAUSE;
    loop {
        let again: Vec<usize> = (0..results.len()).filter(|&i| needs_resend(&results[i]).is_some()).collect();
        if again.is_empty() {
            return Ok((results, link));
        }
        if again.iter().any(|&i| needs_resend(&results[i]) == Some(Resend::Later)) {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_TRY_AGAIN_PAUSE);
        }
        let mut resend = Pipeline::with_capacity(again.len());
        resend.ignore_errors();
        for &i in &again {
            match (needs_resend(&results[i]), scripts[i]) {
                (Some(Resend::AsEval), Some(script)) => resend.add_command(as_eval(cmds[i], script)),
                _ => resend.add_command(cmds[i].clone()),
            };
        }
        let replies = link.send_each(&resend).await.map_err(|e| connection.failed(&e))?;
        for (i, reply) in again.into_iter().zip(replies) {
            results[i] = reply;
        }
    }
}

/// The first pause before a call refused with TRYAGAIN is sent again; it doubles up to [`MAX_TRY_AGAIN_PAUSE`].
const TRY_AGAIN_PAUSE: Duration = Duration::from_millis(2);

/// The longest pause between two sends of a call refused with TRYAGAIN.
const MAX_TRY_AGAIN_PAUSE: Duration = Duration::from_millis(50);

/// How a call whose reply is this is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resend {
    /// The server did not have the script (after a restart, a SCRIPT FLUSH, or on a node new to the cluster).
    AsEval,
    /// Its keys are split between two nodes while their slot migrates: the same, after a pause.
    Later,
}

/// Whether, and how, the call that got `result` is sent again.
fn needs_resend(result: &RedisResult<Value>) -> Option<Resend> {
    match result {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => Some(Resend::AsEval),
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::TryAgain) => Some(Resend::Later),
        _ => None,
    }
}

/// Runs `call` at once, on its own (not batched), within the command timeout: its reply, and the connection it
/// went on, for a command that must follow it there (`WAIT`).
pub(crate) async fn call_alone(connection: &Connection, call: ScriptCall) -> Result<(Value, Link), SnatchError> {
    let mut pipe = Pipeline::with_capacity(1);
    pipe.ignore_errors().add_command(call.cmd);
    let (mut results, link) =
        tokio::time::timeout(connection.timeout(), exchange(connection, &pipe, &[Some(call.script)]))
            .await
            .unwrap_or_else(|_| Err(connection.timed_out()))?;
    let reply = results.pop().unwrap_or_else(|| Err((redis::ErrorKind::Client, "no reply").into()));
    Ok((reply.map_err(|e| connection.failed(&e))?, link))
}
