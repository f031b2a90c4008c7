//! Real `redis-server` processes for the tests: each started on a free port, without persistence, and killed
//! when dropped. `REDIS_URL`, when set, replaces the single server of [`redis_url`].
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod caller;
pub mod stored;

use snatch_core::protocol::offers::CompareAndDelete;
use std::collections::HashSet;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The ports of this process's servers, alive or restarting: a test starting a server never takes one, so that a
/// server killed to be restarted on its port finds it free.
static PORTS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port free now and of no server of this process (held by it until the server drops).
fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if PORTS.lock().unwrap().get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// One `redis-server` process.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    /// Arguments beyond the harness's own.
    args: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it accepts connections.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server as [`RedisServer::start`] does, with `args` added to its command line.
    pub fn start_with(args: &[&str]) -> Self {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut attempt = 1;
        loop {
            // Free now; another process's server may still take it before this one binds it (then: another port).
            let port = free_port();
            let dir = std::env::temp_dir().join(format!("snatch-core-test-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut server = Self { port, child: None, dir, args: args.clone() };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) if attempt < 5 => eprintln!("{e}; trying another port"),
                Err(e) => panic!("{e}"),
            }
            attempt += 1;
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// SIGKILLs the server and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts an empty one on the same port (no server of this process takes it meanwhile;
    /// a moment's wait for one of another process, or a client's socket, to let go of it).
    pub fn restart(&mut self) {
        self.kill();
        let mut attempt = 1;
        while let Err(e) = self.spawn() {
            assert!(attempt < 20, "{e}");
            std::thread::sleep(Duration::from_millis(100));
            attempt += 1;
        }
    }

    /// SIGSTOPs the server: it keeps its connections but answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONTs a paused server.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("server running").id().to_string();
        assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    }

    /// Starts the process on `self.port` and waits until that very process answers (not another server that took
    /// the port first); an error when it exits, or another answers, first.
    fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}); the tests need it: install it with \
                     `sudo apt-get install redis-server` (Debian/Ubuntu) or `brew install redis` (macOS)"
                )
            });
        let (port, pid) = (self.port, child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if child.try_wait().unwrap().is_some() {
                return Err(format!("redis-server on port {port} exited during startup"));
            }
            assert!(Instant::now() < deadline, "redis-server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = Some(child);
        // Fallible, unlike `inspect`: the server that answered may be another test's, gone by now.
        let info = redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .and_then(|mut connection| redis::cmd("INFO").arg("server").query::<String>(&mut connection));
        let info = info.map_err(|e| format!("redis-server on port {port} did not answer INFO: {e}"))?;
        if !info.contains(&format!("process_id:{pid}\r\n")) {
            self.kill();
            return Err(format!("redis-server on port {port} found its port taken by another server"));
        }
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
        PORTS.lock().unwrap().get_or_insert_with(HashSet::new).remove(&self.port);
    }
}

/// The server for a test: `REDIS_URL` if set (no process), else a fresh one kept alive by the returned handle.
pub fn redis_url() -> (Option<RedisServer>, String) {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => (None, url),
        _ => {
            let server = RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    }
}

/// A plain connection for inspecting keys.
pub fn inspect(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// The compare-and-delete of its own the server at `url` offers: `DELIFEQ` from Valkey 9.0, `DELEX … IFEQ` from Redis
/// 8.4 (Valkey answers `INFO` with a `redis_version` of 7.2 too).
pub fn compare_and_delete_of(url: &str) -> Option<CompareAndDelete> {
    let info: String = redis::cmd("INFO").arg("server").query(&mut inspect(url)).unwrap();
    let version = |field: &str| {
        let line = info.lines().find_map(|line| line.strip_prefix(field))?;
        let mut parts = line.split('.').map(|part| part.trim().parse::<u32>().ok());
        Some((parts.next()??, parts.next()??))
    };
    match (version("valkey_version:"), version("redis_version:")) {
        (Some(valkey), _) => (valkey >= (9, 0)).then_some(CompareAndDelete::DelIfEq),
        (None, Some(redis)) => (redis >= (8, 4)).then_some(CompareAndDelete::DelEx),
        (None, None) => None,
    }
}

/// Waits until a schedule's buffer slot (`slot`, its lock key) is held, then makes it another's, as when the waiter
/// holding it was stopped past its lease and a later occurrence took it.
pub async fn take_buffer_slot(url: &str, slot: &str) {
    let mut redis = inspect(url);
    while redis::cmd("GET").arg(slot).query::<Option<String>>(&mut redis).unwrap().is_none() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    redis::cmd("SET").arg(slot).arg("another").arg("PX").arg(60_000).query::<()>(&mut redis).unwrap();
}

/// What a lock's key holds for an acquisition with `token` by a locker of the default configuration (its instance
/// is `localhost:<pid>`; see snatch-protocol's owner.rs).
pub fn held_by(token: &str) -> String {
    format!("{token}:localhost:{}", std::process::id())
}

/// A key no other test (or earlier run against a shared REDIS_URL) uses.
pub fn unique_key(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{name}:{}:{nanos}:{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// A locker of the default configuration on `url`.
pub fn locker(url: &str) -> snatch_core::Locker {
    snatch_core::Locker::new(snatch_core::LockerConfig { urls: vec![url.to_owned()], ..Default::default() }).unwrap()
}

/// Options of a lease of `ttl_ms` that waits up to `wait_ms`.
pub fn options(ttl_ms: u64, wait_ms: u64) -> snatch_core::LockOptions {
    let (ttl, wait) = (Some(Duration::from_millis(ttl_ms)), Duration::from_millis(wait_ms));
    snatch_core::LockOptions { ttl, wait, ..Default::default() }
}
