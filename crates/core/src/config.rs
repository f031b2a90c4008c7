//! Options of a locker and of one lock, with their defaults and validation.

use snatch_protocol::SnatchError;
use std::time::Duration;

/// Longest duration accepted for any time option (ttl, wait, minHold, commandTimeout): 2^31 − 1 ms, as for timers.
pub const MAX_DURATION_MS: u64 = i32::MAX as u64;

/// The longest `jitter` of a schedule: half a day, over which a daily schedule's fleet of occurrences (a nightly sync
/// per tenant) may spread; the occurrence of a longer one would be further from its tick than from the next day's.
pub const MAX_JITTER_MS: u64 = 12 * 3600 * 1000;

/// The shortest ttl: the least that leaves a lease some validity (ttl − ttl·driftFactor − 2 ms > 0) for every
/// driftFactor below 0.5. A shorter one could never be granted, or would be lost as soon as extended.
pub const MIN_TTL_MS: u64 = 5;

/// The default of [`LockerConfig::max_stall`]: long enough for a heavy synchronous stretch (a 3 s block keeps its
/// leases), short enough that a loop stuck for good frees its keys within half a minute and a lease.
pub const DEFAULT_MAX_STALL: Duration = Duration::from_secs(30);

/// The default of [`LockerConfig::fence_ttl`]: 7 days.
pub const DEFAULT_FENCE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Longest `fenceTtl`: 2^53 − 1 ms, the largest integer a JS number holds exactly (Redis takes any 64-bit ttl).
pub const MAX_FENCE_TTL_MS: u64 = (1 << 53) - 1;

/// The largest count option (a list's or a semaphore's `limit`, a size in bytes): 2^31 − 1, as for durations.
pub const MAX_COUNT: u64 = i32::MAX as u64;

/// The most `retries` a schedule takes.
pub const MAX_RETRIES: u32 = 100;

/// The one Redis of a locker given none (nor `REDIS_URL`, which the facade reads).
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// How the URLs of a [`LockerConfig`] are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Topology {
    /// One URL for a single Redis, or an odd number >= 3 of independent masters (Redlock).
    #[default]
    Servers,
    /// Seed nodes of a Redis Cluster; the other nodes are discovered.
    Cluster,
    /// Sentinels that monitor the master named `master`; the locker follows its failovers.
    Sentinel { master: String },
}

/// TLS settings for `rediss://` URLs. PEM text.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// Certificate authorities to trust instead of the default ones.
    pub ca: Vec<String>,
    /// Added to the default authorities when `ca` is empty (the contents of `NODE_EXTRA_CA_CERTS`).
    pub extra_ca: Option<String>,
    /// Client certificate (chain), for servers that ask for one.
    pub cert: Option<String>,
    /// The client certificate's private key.
    pub key: Option<String>,
    /// The name the server's certificate is checked against (and sent as SNI), instead of the URL's host.
    pub servername: Option<String>,
    /// Check the server's certificate (default true).
    pub reject_unauthorized: bool,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca.len())
            .field("servername", &self.servername)
            .field("reject_unauthorized", &self.reject_unauthorized)
            .finish_non_exhaustive()
    }
}

/// How a [`crate::Locker`] reaches Redis and what it defaults to.
#[derive(Clone)]
pub struct LockerConfig {
    /// The servers, read as `topology` says.
    pub urls: Vec<String>,
    /// What the URLs are.
    pub topology: Topology,
    /// TLS settings for the `rediss://` URLs among them (TLS needs such a URL).
    pub tls: Option<TlsOptions>,
    /// ACL user for the Redis servers, when their URLs name none.
    pub username: Option<String>,
    /// Password for the Redis servers, when their URLs give none.
    pub password: Option<String>,
    /// Replicas that must acknowledge an acquisition (`WAIT`) before it counts; 0 waits for none.
    pub wait_replicas: u32,
    /// How long a lock's fence counter is kept after the lock's last acquisition (or attempt on the direct
    /// connection), so that nothing of a key stays in Redis for good.
    pub fence_ttl: Duration,
    /// Whether one-attempt calls may take direct connections where they apply (false in a runtime that has no
    /// libuv polling for the binding's: Bun, Deno).
    pub direct: bool,
    /// Prefix of every key the locker writes.
    pub prefix: String,
    /// Default lease of a lock.
    pub ttl: Duration,
    /// Time one Redis command may take before it counts as failed.
    pub command_timeout: Duration,
    /// Redlock clock-drift factor: the validity of a lease is `ttl − elapsed − (ttl·drift_factor + 2 ms)`.
    pub drift_factor: f64,
    /// Names this process in every lock's stored value (see snatch-protocol's owner.rs) and in schedules' records
    /// and registrations.
    pub instance_id: String,
    /// Leases are renewed only while the caller's event loop has turned within this (see lock/stall.rs); `None`:
    /// always.
    pub max_stall: Option<Duration>,
}

impl std::fmt::Debug for LockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password, nor one in a URL.
        let urls: Vec<String> = self.urls.iter().map(|u| crate::redact::redact(u)).collect();
        f.debug_struct("LockerConfig")
            .field("urls", &urls)
            .field("topology", &self.topology)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .field("command_timeout", &self.command_timeout)
            .field("fence_ttl", &self.fence_ttl)
            .field("instance_id", &self.instance_id)
            .finish_non_exhaustive()
    }
}

impl Default for LockerConfig {
    fn default() -> Self {
        Self {
            urls: vec![DEFAULT_URL.to_owned()],
            topology: Topology::Servers,
            tls: None,
            username: None,
            password: None,
            wait_replicas: 0,
            fence_ttl: DEFAULT_FENCE_TTL,
            direct: true,
            prefix: "snatch:".to_owned(),
            ttl: Duration::from_millis(30_000),
            command_timeout: Duration::from_millis(1_000),
            drift_factor: 0.01,
            instance_id: format!("localhost:{}", std::process::id()),
            max_stall: Some(DEFAULT_MAX_STALL),
        }
    }
}

impl LockerConfig {
    /// Checks the values that the type alone does not constrain (URLs are checked when parsed).
    pub fn validate(&self) -> Result<(), SnatchError> {
        let n = self.urls.len();
        let what = match &self.topology {
            Topology::Servers => "urls",
            Topology::Cluster => "cluster",
            Topology::Sentinel { .. } => "sentinel.urls",
        };
        if n == 0 {
            return Err(SnatchError::type_arg(format!("{what} must name at least one Redis server")));
        }
        match &self.topology {
            Topology::Servers if n > 1 && (n < 3 || n.is_multiple_of(2)) => {
                return Err(SnatchError::range_arg(format!(
                    "urls must list an odd number (>= 3) of independent Redis masters, got {n}"
                )));
            }
            Topology::Sentinel { master } if master.is_empty() => {
                return Err(SnatchError::type_arg("sentinel.name must name the monitored master"));
            }
            _ => {}
        }
        if self.urls.iter().any(|u| is_memory(u)) && (n > 1 || self.topology != Topology::Servers) {
            return Err(SnatchError::type_arg(
                "a memory:// URL is the only URL of its locker (no Redlock, Cluster or Sentinel)",
            ));
        }
        if self.urls.iter().any(|u| is_memory(u)) && self.wait_replicas > 0 {
            return Err(SnatchError::type_arg("waitReplicas needs Redis replicas: a memory:// locker has none"));
        }
        if let Some(tls) = &self.tls {
            if !self.urls.iter().any(|u| u.starts_with("rediss://")) {
                return Err(SnatchError::type_arg(
                    "tls options were given but no URL uses TLS: use rediss:// URLs (redis:// is plaintext)",
                ));
            }
            if tls.servername.is_some() && self.topology == Topology::Cluster {
                return Err(SnatchError::type_arg(
                    "tls.servername is not supported with cluster: each node is checked against the address the cluster announces",
                ));
            }
            if tls.cert.is_some() != tls.key.is_some() {
                return Err(SnatchError::type_arg("tls.cert and tls.key go together: give both or neither"));
            }
        }

        validate_ttl(self.ttl)?;
        validate_duration("commandTimeout", self.command_timeout)?;
        validate_duration("fenceTtl", self.fence_ttl)?;
        if let Some(max_stall) = self.max_stall {
            validate_duration("maxStall", max_stall)?;
        }
        snatch_protocol::owner::check_instance(&self.instance_id).map_err(SnatchError::type_arg)?;
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(SnatchError::range_arg(format!("driftFactor must be in [0, 0.5), got {}", self.drift_factor)));
        }
        Ok(())
    }
}

/// Options of one acquisition.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Lease; `None` takes the locker's ttl.
    pub ttl: Option<Duration>,
    /// Renew the lease every ttl/3 while held.
    pub auto_extend: bool,
    /// Keep the key at least this long after acquisition, even if released earlier.
    pub min_hold: Duration,
    /// How long to keep trying to get the lock; zero means one attempt.
    pub wait: Duration,
    /// Wait in turn: behind the fair waiters of the key that came before, in every process (not on Redlock).
    pub fair: bool,
}

impl LockOptions {
    /// Checks the durations.
    pub fn validate(&self) -> Result<(), SnatchError> {
        if let Some(ttl) = self.ttl {
            validate_ttl(ttl)?;
        }
        validate_duration("minHold", self.min_hold)?;
        validate_duration("wait", self.wait)?;
        Ok(())
    }
}

/// Whether `url` names an in-process store (`memory://`, or `memory://<name>` for one of several) rather than Redis.
pub fn is_memory(url: &str) -> bool {
    url.starts_with("memory://")
}

/// The range, in ms, of duration option `name`: a lease at least [`MIN_TTL_MS`], `fenceTtl` up to
/// [`MAX_FENCE_TTL_MS`], the timeouts, the retry delays, `maxStall` and `resultTtl` at least 1, every other from 0;
/// up to [`MAX_DURATION_MS`].
fn duration_range(name: &str) -> (u64, u64) {
    match name {
        "ttl" => (MIN_TTL_MS, MAX_DURATION_MS),
        "fenceTtl" => (1, MAX_FENCE_TTL_MS),
        "commandTimeout" | "timeout" | "retryDelay" | "maxStall" | "retry" | "resultTtl" => (1, MAX_DURATION_MS),
        "jitter" => (0, MAX_JITTER_MS),
        _ => (0, MAX_DURATION_MS),
    }
}

/// The error of duration option `name` given `value`, which is not an integer number of milliseconds in its range:
/// one message whatever is wrong with it.
pub fn duration_error(name: &str, value: impl std::fmt::Display) -> SnatchError {
    let (low, high) = duration_range(name);
    SnatchError::range_arg(format!("{name} must be an integer number of milliseconds in [{low}, {high}], got {value}"))
}

/// The range of count option `name` (not a duration), when it is one: `retries` from 0 to [`MAX_RETRIES`], `history`
/// from 1 to [`MAX_HISTORY`], every other (a `limit`, a size in bytes) from 1 to [`MAX_COUNT`].
///
/// [`MAX_HISTORY`]: snatch_protocol::schedule::MAX_HISTORY
fn count_range(name: &str) -> Option<(u64, u64)> {
    match name {
        "retries" => Some((0, u64::from(MAX_RETRIES))),
        "history" => Some((1, u64::from(snatch_protocol::schedule::MAX_HISTORY))),
        "limit" | "maxResultBytes" | "maxBytes" => Some((1, MAX_COUNT)),
        _ => None,
    }
}

/// Checks option `name`'s number `value` as the caller gave it: an integer in its range (see [`count_range`], and
/// [`duration_range`] for the durations: the others).
pub fn check_option(name: &str, value: f64) -> Result<(), SnatchError> {
    let shown = || {
        if value.is_infinite() {
            format!("{}Infinity", if value < 0.0 { "-" } else { "" })
        } else {
            value.to_string()
        }
    };
    let (low, high) = count_range(name).unwrap_or_else(|| duration_range(name));
    if value.is_finite() && value.fract() == 0.0 && value >= low as f64 && value <= high as f64 {
        return Ok(());
    }
    Err(match count_range(name) {
        Some(_) => SnatchError::range_arg(format!("{name} must be an integer from {low} to {high}, got {}", shown())),
        None => duration_error(name, shown()),
    })
}

/// Rejects a lease ttl outside [[`MIN_TTL_MS`], [`MAX_DURATION_MS`]].
pub fn validate_ttl(ttl: Duration) -> Result<(), SnatchError> {
    validate_duration("ttl", ttl)
}

/// Rejects duration `d` of option `name` outside its range ([`duration_range`]).
pub(crate) fn validate_duration(name: &str, d: Duration) -> Result<(), SnatchError> {
    let (low, high) = duration_range(name);
    let ms = d.as_millis();
    if ms < u128::from(low) || ms > u128::from(high) {
        return Err(duration_error(name, ms));
    }
    Ok(())
}
