//! Options as the facade passes them, converted to the core's types. The facade has checked the JS types; the
//! numbers are checked here.

use napi_derive::napi;
use snatch_core::limits::{DEFAULT_HISTORY_LIMIT, DEFAULT_LIST_LIMIT};
use snatch_core::protocol::run::Purpose;
use snatch_core::{
    duration_error, Concurrency, FleetRequest, LockOptions, LockerConfig, Reentering, SnatchError, TlsOptions, Topology,
};
use std::time::Duration;

/// Options of a locker (`url`, `cluster` or `sentinel.urls` folded into `urls`, with `sentinel.name` as
/// `sentinelName`; `REDIS_URL` applied by the facade).
#[napi(object)]
pub struct LockerInit {
    pub urls: Vec<String>,
    /// The URLs are a cluster's seed nodes.
    pub cluster: Option<bool>,
    /// The URLs are sentinels of the master of this name.
    pub sentinel_name: Option<String>,
    pub tls: Option<TlsInit>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub wait_replicas: Option<f64>,
    pub fence_ttl: Option<f64>,
    /// False in a runtime without the libuv functions the direct connection needs (the facade knows: Bun, Deno).
    pub direct: Option<bool>,
    pub prefix: Option<String>,
    pub ttl: Option<f64>,
    pub command_timeout: Option<f64>,
    pub drift_factor: Option<f64>,
    /// Names this process in locks' values and schedules' records (the facade defaults it to `hostname:pid`).
    pub instance_id: Option<String>,
    /// Leases are renewed only while the event loop turned within this many ms (the facade beats); Infinity: always.
    pub max_stall: Option<f64>,
}

/// TLS options, PEM text (the facade has turned Buffers into strings and read `NODE_EXTRA_CA_CERTS`).
#[napi(object)]
pub struct TlsInit {
    pub ca: Option<Vec<String>>,
    pub extra_ca: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub servername: Option<String>,
    pub reject_unauthorized: Option<bool>,
}

/// Options of one acquisition, as the user gave them. The facade passes none when the user gave none, saving the
/// object and its property reads on the hot path; [`lock_options`] applies the defaults.
#[napi(object)]
pub struct LockInit {
    pub ttl: Option<f64>,
    pub auto_extend: Option<bool>,
    pub min_hold: Option<f64>,
    pub wait: Option<f64>,
    pub fair: Option<bool>,
}

/// A call made inside the fn of runs of the facade's (snatch-core's `Reentering`).
#[napi(object)]
pub struct ReenterInit {
    /// Its keys, in the call's order.
    pub keys: Vec<String>,
    /// A lock handed to the facade (tryLock, lock), not a run of fn.
    pub lock: bool,
    /// A run of withLocks.
    pub set: bool,
    /// A waiting call (withLock, lock, withLocks).
    pub waits: bool,
    /// The `reentrant` option.
    pub reentrant: bool,
    /// The runs whose fn the call runs inside, by id.
    pub within: Vec<u32>,
}

impl From<ReenterInit> for Reentering {
    fn from(o: ReenterInit) -> Self {
        let purpose = if o.lock { Purpose::Lock } else { Purpose::Run };
        Self { keys: o.keys, purpose, set: o.set, waits: o.waits, reentrant: o.reentrant, within: o.within }
    }
}

impl TryFrom<LockerInit> for LockerConfig {
    type Error = SnatchError;

    fn try_from(o: LockerInit) -> Result<Self, SnatchError> {
        let defaults = LockerConfig::default();
        let topology = match (o.cluster, o.sentinel_name) {
            (_, Some(master)) => Topology::Sentinel { master },
            (Some(true), None) => Topology::Cluster,
            _ => Topology::Servers,
        };
        let tls = o.tls.map(|t| TlsOptions {
            ca: t.ca.unwrap_or_default(),
            extra_ca: t.extra_ca,
            cert: t.cert,
            key: t.key,
            servername: t.servername,
            reject_unauthorized: t.reject_unauthorized.unwrap_or(true),
        });
        let wait_replicas = o.wait_replicas.unwrap_or(0.0);
        if !wait_replicas.is_finite()
            || wait_replicas.fract() != 0.0
            || !(0.0..=f64::from(u32::MAX)).contains(&wait_replicas)
        {
            return Err(SnatchError::range_arg(format!(
                "waitReplicas must be a non-negative integer, got {wait_replicas}"
            )));
        }
        Ok(LockerConfig {
            urls: o.urls,
            topology,
            tls,
            username: o.username,
            password: o.password,
            wait_replicas: wait_replicas as u32,
            fence_ttl: millis_or("fenceTtl", o.fence_ttl, defaults.fence_ttl)?,
            direct: o.direct.unwrap_or(defaults.direct),
            prefix: o.prefix.unwrap_or(defaults.prefix),
            ttl: millis_or("ttl", o.ttl, defaults.ttl)?,
            command_timeout: millis_or("commandTimeout", o.command_timeout, defaults.command_timeout)?,
            drift_factor: o.drift_factor.unwrap_or(defaults.drift_factor),
            instance_id: o.instance_id.unwrap_or(defaults.instance_id),
            max_stall: match o.max_stall {
                Some(ms) if ms == f64::INFINITY => None,
                Some(ms) => Some(millis("maxStall", ms)?),
                None => defaults.max_stall,
            },
        })
    }
}

/// The options of one acquisition: `init` checked and converted, with the defaults for what it leaves out;
/// `auto_extend` is the method's default for renewing the lease (true for runs, false for locks).
pub(crate) fn lock_options(init: Option<LockInit>, auto_extend: bool) -> Result<LockOptions, SnatchError> {
    let Some(o) = init else {
        return Ok(LockOptions { auto_extend, ..LockOptions::default() });
    };
    Ok(LockOptions {
        ttl: o.ttl.map(|v| millis("ttl", v)).transpose()?,
        auto_extend: o.auto_extend.unwrap_or(auto_extend),
        min_hold: millis_or("minHold", o.min_hold, Duration::ZERO)?,
        wait: millis_or("wait", o.wait, Duration::ZERO)?,
        fair: o.fair.unwrap_or(false),
    })
}

/// `value` milliseconds, which must be a non-negative integer (the core checks the bounds, with the same message).
pub(crate) fn millis(name: &str, value: f64) -> Result<Duration, SnatchError> {
    if !value.is_finite() || value.fract() != 0.0 || value < 0.0 {
        let shown = if value.is_infinite() {
            format!("{}Infinity", if value < 0.0 { "-" } else { "" })
        } else {
            value.to_string()
        };
        return Err(duration_error(name, shown));
    }
    Ok(Duration::from_millis(value as u64))
}

fn millis_or(name: &str, value: Option<f64>, default: Duration) -> Result<Duration, SnatchError> {
    value.map_or(Ok(default), |v| millis(name, v))
}

/// Options of a schedule (the facade has applied the test-only clock offset from the environment).
#[napi(object)]
pub struct ScheduleInit {
    pub ttl: Option<f64>,
    /// IANA zone; default UTC.
    pub timezone: Option<String>,
    /// Test only: milliseconds added to this process's clock when deciding when occurrences are due.
    pub clock_offset: Option<f64>,
    /// Milliseconds after its tick within which an occurrence no replica ran still runs; 0: never late.
    pub starting_deadline: Option<f64>,
    /// Further attempts after fn failed.
    pub retries: Option<u32>,
    /// Milliseconds before the first retry, doubled for each next one.
    pub retry_delay: Option<f64>,
    /// `forbid`, `allow`, `replace` or `buffer`.
    pub concurrency: Option<String>,
    /// Milliseconds an attempt may take before its signal aborts.
    pub timeout: Option<f64>,
    /// Milliseconds after which a running attempt makes the schedule's health `stuck` (nothing aborts it).
    pub max_runtime: Option<f64>,
    /// How many records Redis keeps.
    pub history: Option<u32>,
    /// Milliseconds: each occurrence starts at its tick plus an offset below this, the same on every replica.
    pub jitter: Option<f64>,
}

impl TryFrom<ScheduleInit> for snatch_core::ScheduleOptions {
    type Error = SnatchError;

    fn try_from(o: ScheduleInit) -> Result<Self, SnatchError> {
        let defaults = snatch_core::ScheduleOptions::default();
        let concurrency = o.concurrency.as_deref().map_or(Ok(defaults.concurrency), Concurrency::parse)?;
        let options = snatch_core::ScheduleOptions {
            ttl: o.ttl.map(|v| millis("ttl", v)).transpose()?,
            clock_offset_ms: o.clock_offset.unwrap_or(0.0) as i64,
            starting_deadline: millis_or("startingDeadline", o.starting_deadline, defaults.starting_deadline)?,
            retries: o.retries.unwrap_or(defaults.retries),
            retry_delay: millis_or("retryDelay", o.retry_delay, defaults.retry_delay)?,
            concurrency,
            timeout: o.timeout.map(|v| millis("timeout", v)).transpose()?,
            max_runtime: o.max_runtime.map(|v| millis("maxRuntime", v)).transpose()?,
            history: o.history.unwrap_or(defaults.history),
            jitter: millis_or("jitter", o.jitter, defaults.jitter)?,
        };
        options.validate()?;
        Ok(options)
    }
}

/// A question to the fleet (`schedules()`, `history()`, `suspend()`, `resume()`, `trigger()`, `locks()`; the
/// dashboard's `deployment` and `semaphores`).
#[napi(object)]
pub struct FleetQuestion {
    /// `schedules`, `history`, `suspend`, `resume`, `trigger`, `locks`, `deployment` or `semaphores`.
    pub kind: String,
    /// The schedule's name (all but `schedules` and `locks`).
    pub name: Option<String>,
    /// How many records or locks, at most.
    pub limit: Option<u32>,
    /// The glob the locks' names match (`locks`).
    pub pattern: Option<String>,
}

impl TryFrom<FleetQuestion> for FleetRequest {
    type Error = SnatchError;

    fn try_from(q: FleetQuestion) -> Result<Self, SnatchError> {
        let name = || q.name.clone().ok_or_else(|| SnatchError::type_arg("the schedule's name is required"));
        Ok(match q.kind.as_str() {
            "schedules" => FleetRequest::Schedules,
            "history" => FleetRequest::History { name: name()?, limit: q.limit.unwrap_or(DEFAULT_HISTORY_LIMIT) },
            "suspend" => FleetRequest::Suspend(name()?),
            "resume" => FleetRequest::Resume(name()?),
            "trigger" => FleetRequest::Trigger(name()?),
            "locks" => FleetRequest::Locks {
                pattern: q.pattern.unwrap_or_else(|| "*".to_owned()),
                limit: q.limit.unwrap_or(DEFAULT_LIST_LIMIT),
            },
            "deployment" => FleetRequest::Deployment,
            "semaphores" => FleetRequest::Semaphores {
                pattern: q.pattern.unwrap_or_else(|| "*".to_owned()),
                limit: q.limit.unwrap_or(DEFAULT_LIST_LIMIT),
            },
            other => return Err(SnatchError::type_arg(format!("unknown question '{other}'"))),
        })
    }
}
