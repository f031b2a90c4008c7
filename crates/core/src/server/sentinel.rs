//! A Sentinel deployment: the master is whatever server the sentinels name for the monitored name, asked again
//! whenever the connection to it has to be opened anew (after it dropped, or the server turned replica), so the
//! locker follows failovers without a restart.

use crate::server::endpoint::{Access, Endpoint};
use crate::server::failure::describe;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::{RedisError, Value};
use std::time::Duration;

/// The sentinels of one monitored master.
pub(crate) struct Sentinels {
    sentinels: Vec<Endpoint>,
    /// The monitored master's name.
    name: String,
    /// The credentials and TLS settings of the master (the sentinels' own are in their URLs).
    access: Access,
    /// The master is reached over TLS when the sentinels are.
    tls: bool,
}

impl Sentinels {
    pub(crate) fn new(sentinels: Vec<Endpoint>, name: String, access: Access) -> Self {
        let tls = sentinels.iter().any(Endpoint::is_tls);
        Self { sentinels, name, access, tls }
    }

    /// The master's endpoint, as the first sentinel to answer names it. Every sentinel is asked at once, each
    /// attempt bounded by `timeout`.
    pub(crate) async fn master(&self, timeout: Duration) -> Result<Endpoint, String> {
        let mut asks: FuturesUnordered<_> = self.sentinels.iter().map(|s| self.ask(s, timeout)).collect();
        let mut failures = Vec::new();
        while let Some(answer) = asks.next().await {
            match answer {
                Ok((host, port)) => return self.access.discovered(&host, port, self.tls).map_err(|e| e.to_string()),
                Err(failure) => failures.push(failure),
            }
        }
        Err(format!("no sentinel named a master for '{}' ({})", self.name, failures.join("; ")))
    }

    /// A command connection to the master the sentinels name, checked to be a master (a server just demoted, or
    /// not yet promoted, is not).
    pub(crate) async fn connect_master(&self, timeout: Duration) -> Result<MultiplexedConnection, String> {
        let master = self.master(timeout).await?;
        let fail = |e: RedisError| format!("{}: {}", master.label, describe(&e));
        let mut conn = master.connect(timeout).await.map_err(fail)?;
        let role: Value = redis::cmd("ROLE").query_async(&mut conn).await.map_err(fail)?;
        match role {
            Value::Array(fields)
                if fields.first().is_some_and(|f| matches!(f, Value::BulkString(b) if b == b"master")) =>
            {
                Ok(conn)
            }
            _ => Err(format!("{}: named master by the sentinels, but not a master (failover under way)", master.label)),
        }
    }

    /// What `sentinel` answers to `SENTINEL get-master-addr-by-name`.
    async fn ask(&self, sentinel: &Endpoint, timeout: Duration) -> Result<(String, u16), String> {
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", sentinel.label);
        let mut conn = sentinel.connect(timeout).await.map_err(|e| fail(&describe(&e)))?;
        let mut ask = redis::cmd("SENTINEL");
        ask.arg("get-master-addr-by-name").arg(&self.name);
        let address: Option<(String, u16)> = ask.query_async(&mut conn).await.map_err(|e| fail(&describe(&e)))?;
        address.ok_or_else(|| fail(&format!("does not monitor a master named '{}'", self.name)))
    }
}
