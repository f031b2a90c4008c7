//! `memory://`: an in-process stand-in for one Redis server, so that users' tests of code that takes locks need no
//! server. It runs the very scripts a server runs (protocol/scripts, in an embedded Lua 5.1, Redis's version) one at
//! a time, over an in-memory keyspace that implements the commands they use. `TIME` and expiries follow this
//! process's clock; within a script, expiries are judged at the time it started, as on Redis, where time stands
//! still in a script. Lockers on the same `memory://` URL in one process share one store; it is not distributed.

use crate::server::script_call::ScriptCall;
use crate::server::waiters::{wake, WaiterMap};
use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};
use redis::{Arg, Value};
use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

/// The stores of this process by URL, alive while a locker uses them.
static STORES: LazyLock<Mutex<HashMap<String, Weak<Memory>>>> = LazyLock::new(Default::default);

/// One in-memory server: a Lua state whose `redis.call` runs commands on the store's keyspace.
pub(crate) struct Memory {
    /// The Lua state and the scripts compiled in it. Held for a script's whole run: scripts are atomic.
    scripts: Mutex<Scripts>,
    keyspace: Arc<Mutex<Keyspace>>,
}

struct Scripts {
    lua: Lua,
    /// Compiled scripts by SHA1.
    loaded: HashMap<String, Function>,
}

/// The keys and their values, and who hears of `PUBLISH`.
#[derive(Default)]
struct Keyspace {
    entries: HashMap<Vec<u8>, Entry>,
    /// The time expiries are judged by while a script runs (ms since the epoch): fixed at its start, as Redis has
    /// it, so that a key a script found cannot expire under it (its `PTTL` then answering -2, say).
    script_time: u64,
    /// The waiters of the nodes on this store (see waker.rs).
    listeners: Vec<Weak<WaiterMap>>,
}

struct Entry {
    data: Data,
    /// When it expires, in ms since the epoch.
    expires_at: Option<u64>,
}

enum Data {
    String(Vec<u8>),
    /// A sorted set: members with their scores.
    SortedSet(HashMap<Vec<u8>, f64>),
}

/// A command's failure, as Redis words it.
type Failure = String;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Memory {
    /// The store of `url` in this process, made on first use.
    pub(crate) fn of(url: &str) -> Result<Arc<Self>, String> {
        let mut stores = STORES.lock().expect("stores poisoned");
        stores.retain(|_, store| store.strong_count() > 0);
        if let Some(store) = stores.get(url).and_then(Weak::upgrade) {
            return Ok(store);
        }
        let store = Arc::new(Self::new()?);
        stores.insert(url.to_owned(), Arc::downgrade(&store));
        Ok(store)
    }

    fn new() -> Result<Self, String> {
        let lua = Lua::new();
        let keyspace = Arc::new(Mutex::new(Keyspace::default()));
        let commands = keyspace.clone();
        let call = lua
            .create_function(move |lua, args: MultiValue| {
                let args = args.iter().map(lua_arg).collect::<Result<Vec<_>, _>>().map_err(mlua::Error::runtime)?;
                let reply = commands.lock().expect("keyspace poisoned").command(&args).map_err(mlua::Error::runtime)?;
                to_lua(lua, reply)
            })
            .map_err(|e| e.to_string())?;
        let redis = lua.create_table().map_err(|e| e.to_string())?;
        redis.set("call", call).map_err(|e| e.to_string())?;
        lua.globals().set("redis", redis).map_err(|e| e.to_string())?;
        Ok(Self { scripts: Mutex::new(Scripts { lua, loaded: HashMap::new() }), keyspace })
    }

    /// Has `PUBLISH` wake the waiters of `waiters` (a node's, see waker.rs) for as long as they exist.
    pub(crate) fn listen(&self, waiters: Weak<WaiterMap>) {
        let mut keyspace = self.keyspace.lock().expect("keyspace poisoned");
        keyspace.listeners.retain(|l| l.strong_count() > 0);
        keyspace.listeners.push(waiters);
    }

    /// Runs `call` (a script's EVALSHA) as a server would: its reply, or the error it raised.
    pub(crate) fn run(&self, call: &ScriptCall) -> Result<Value, String> {
        // EVALSHA <sha> <numkeys> <keys…> <args…>
        let args: Vec<&[u8]> = call
            .cmd
            .args_iter()
            .skip(2)
            .filter_map(|arg| match arg {
                Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        let count: usize = std::str::from_utf8(args[0]).ok().and_then(|n| n.parse().ok()).ok_or("bad numkeys")?;
        let (keys, argv) = args[1..].split_at(count);
        let mut scripts = self.scripts.lock().expect("scripts poisoned");
        let Scripts { lua, loaded } = &mut *scripts;
        let function = match loaded.entry(call.script.hash().to_owned()) {
            Slot::Occupied(f) => f.into_mut(),
            Slot::Vacant(slot) => {
                slot.insert(lua.load(call.script.source()).into_function().map_err(|e| e.to_string())?)
            }
        };
        let strings = |items: &[&[u8]]| -> mlua::Result<Table> {
            lua.create_sequence_from(
                items.iter().map(|item| lua.create_string(item)).collect::<mlua::Result<Vec<_>>>()?,
            )
        };
        let run = || -> mlua::Result<LuaValue> {
            lua.globals().set("KEYS", strings(keys)?)?;
            lua.globals().set("ARGV", strings(argv)?)?;
            function.call(())
        };
        self.keyspace.lock().expect("keyspace poisoned").script_time = now_ms();
        let reply = run().map_err(|e| match e {
            mlua::Error::CallbackError { cause, .. } => cause.to_string(),
            other => other.to_string(),
        })?;
        from_lua(reply)
    }
}

/// A `redis.call` argument as Redis takes it: a string, or a number written out.
fn lua_arg(value: &LuaValue) -> Result<Vec<u8>, String> {
    match value {
        LuaValue::String(s) => Ok(s.as_bytes().to_vec()),
        LuaValue::Integer(n) => Ok(n.to_string().into_bytes()),
        LuaValue::Number(n) => Ok(format_number(*n).into_bytes()),
        other => {
            Err(format!("ERR Lua redis lib command arguments must be strings or integers, got {}", other.type_name()))
        }
    }
}

/// A number as Redis's Lua writes one into a command: its integer digits when it has no fraction.
fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// A command's reply as a Lua value (Redis's conversion: nil is false, a status is `{ok = …}`).
fn to_lua(lua: &Lua, reply: Value) -> mlua::Result<LuaValue> {
    Ok(match reply {
        Value::Nil => LuaValue::Boolean(false),
        Value::Int(n) => LuaValue::Number(n as f64),
        Value::BulkString(bytes) => LuaValue::String(lua.create_string(bytes)?),
        Value::Okay => {
            let status = lua.create_table()?;
            status.set("ok", "OK")?;
            LuaValue::Table(status)
        }
        Value::SimpleString(text) => {
            let status = lua.create_table()?;
            status.set("ok", text)?;
            LuaValue::Table(status)
        }
        Value::Array(items) => {
            let table = lua.create_table()?;
            for (at, item) in items.into_iter().enumerate() {
                table.raw_set(at + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(table)
        }
        other => return Err(mlua::Error::runtime(format!("no Lua form for {other:?}"))),
    })
}

/// A script's return value as Redis replies with it (numbers truncated to integers, `false` as nil, a table as an
/// array up to its first nil, `{err = …}` as an error).
fn from_lua(value: LuaValue) -> Result<Value, String> {
    Ok(match value {
        LuaValue::Nil | LuaValue::Boolean(false) => Value::Nil,
        LuaValue::Boolean(true) => Value::Int(1),
        LuaValue::Integer(n) => Value::Int(n),
        LuaValue::Number(n) => Value::Int(n as i64),
        LuaValue::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        LuaValue::Table(table) => {
            if let Ok(LuaValue::String(err)) = table.raw_get::<LuaValue>("err") {
                return Err(err.to_string_lossy());
            }
            if let Ok(LuaValue::String(_)) = table.raw_get::<LuaValue>("ok") {
                return Ok(Value::Okay);
            }
            let mut items = Vec::new();
            for at in 1.. {
                match table.raw_get::<LuaValue>(at).map_err(|e| e.to_string())? {
                    LuaValue::Nil => break,
                    item => items.push(from_lua(item)?),
                }
            }
            Value::Array(items)
        }
        other => return Err(format!("a script returned a {}", other.type_name())),
    })
}

/// Now, in ms since the epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `arg` as an integer, or Redis's error for one that is not.
fn integer(arg: &[u8]) -> Result<i64, Failure> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "ERR value is not an integer or out of range".to_owned())
}

/// `arg` as a score: a number, `-inf` or `+inf` (the scripts use no exclusive `(` bounds).
fn score(arg: &[u8]) -> Result<f64, Failure> {
    match arg {
        b"-inf" => Ok(f64::NEG_INFINITY),
        b"+inf" | b"inf" => Ok(f64::INFINITY),
        _ => std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "ERR value is not a valid float".to_owned()),
    }
}

impl Keyspace {
    /// The live entry of `key` (an expired one is dropped first).
    fn live(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let now = self.script_time;
        if self.entries.get(key).is_some_and(|e| e.expires_at.is_some_and(|at| at <= now)) {
            self.entries.remove(key);
        }
        self.entries.get_mut(key)
    }

    /// The string at `key`: `None` when there is none, an error when the key holds another type.
    fn string(&mut self, key: &[u8]) -> Result<Option<&mut Vec<u8>>, Failure> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry { data: Data::String(s), .. }) => Ok(Some(s)),
            Some(_) => Err(WRONGTYPE.to_owned()),
        }
    }

    /// The sorted set at `key`: `None` when there is none, an error when the key holds another type.
    fn sorted_set(&mut self, key: &[u8]) -> Result<Option<&mut HashMap<Vec<u8>, f64>>, Failure> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry { data: Data::SortedSet(set), .. }) => Ok(Some(set)),
            Some(_) => Err(WRONGTYPE.to_owned()),
        }
    }

    /// The members of the sorted set at `key` in order (by score, then member), with their scores.
    fn ordered(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, f64)>, Failure> {
        let mut members: Vec<(Vec<u8>, f64)> =
            self.sorted_set(key)?.map(|set| set.iter().map(|(m, s)| (m.clone(), *s)).collect()).unwrap_or_default();
        members.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        Ok(members)
    }

    /// Drops the sorted set at `key` once it is empty, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        if matches!(self.entries.get(key), Some(Entry { data: Data::SortedSet(set), .. }) if set.is_empty()) {
            self.entries.remove(key);
        }
    }

    /// Runs one command of a script.
    fn command(&mut self, args: &[Vec<u8>]) -> Result<Value, Failure> {
        let name = args.first().map(|n| n.to_ascii_uppercase()).unwrap_or_default();
        let arg = |n: usize| args.get(n).map(Vec::as_slice).ok_or_else(|| "ERR wrong number of arguments".to_owned());
        Ok(match name.as_slice() {
            b"TIME" => {
                let micros = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros());
                let (secs, micros) = (micros / 1_000_000, micros % 1_000_000);
                Value::Array(vec![
                    Value::BulkString(secs.to_string().into_bytes()),
                    Value::BulkString(micros.to_string().into_bytes()),
                ])
            }
            b"GET" => self.string(arg(1)?)?.map_or(Value::Nil, |s| Value::BulkString(s.clone())),
            b"TYPE" => Value::SimpleString(
                match self.live(arg(1)?).map(|entry| &entry.data) {
                    None => "none",
                    Some(Data::String(_)) => "string",
                    Some(Data::SortedSet(_)) => "zset",
                }
                .to_owned(),
            ),
            b"SET" => self.set(arg(1)?, arg(2)?, &args[3..])?,
            b"INCR" => {
                let key = arg(1)?;
                let next = match self.string(key)? {
                    Some(value) => integer(value)?.checked_add(1).ok_or("ERR increment or decrement would overflow")?,
                    None => 1,
                };
                let expires_at = self.live(key).and_then(|e| e.expires_at);
                self.entries
                    .insert(key.to_vec(), Entry { data: Data::String(next.to_string().into_bytes()), expires_at });
                Value::Int(next)
            }
            b"APPEND" => {
                let (key, tail) = (arg(1)?, arg(2)?);
                let len = match self.string(key)? {
                    Some(value) => {
                        value.extend_from_slice(tail);
                        value.len()
                    }
                    None => {
                        self.entries
                            .insert(key.to_vec(), Entry { data: Data::String(tail.to_vec()), expires_at: None });
                        tail.len()
                    }
                };
                Value::Int(len as i64)
            }
            b"PEXPIRE" | b"PEXPIREAT" => {
                let at = integer(arg(2)?)?;
                let at = if name.as_slice() == b"PEXPIRE" { self.script_time as i64 + at } else { at };
                match self.live(arg(1)?) {
                    Some(entry) => {
                        entry.expires_at = Some(at.max(0) as u64);
                        Value::Int(1)
                    }
                    None => Value::Int(0),
                }
            }
            b"PTTL" => match self.live(arg(1)?) {
                None => Value::Int(-2),
                Some(Entry { expires_at: None, .. }) => Value::Int(-1),
                Some(Entry { expires_at: Some(at), .. }) => Value::Int(at.saturating_sub(self.script_time) as i64),
            },
            b"DEL" => {
                let mut deleted = 0;
                for key in &args[1..] {
                    deleted += i64::from(self.live(key).is_some() && self.entries.remove(key.as_slice()).is_some());
                }
                Value::Int(deleted)
            }
            b"PUBLISH" => {
                let channel = String::from_utf8_lossy(arg(1)?);
                let listeners = self.listeners.iter().filter_map(Weak::upgrade);
                let woken: usize = listeners.map(|w| wake(&w.lock().expect("waiters poisoned"), &channel)).sum();
                Value::Int(woken as i64)
            }
            b"ZADD" => {
                let key = arg(1)?;
                let pairs = &args[2..];
                if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
                    return Err("ERR syntax error".to_owned());
                }
                let scored =
                    pairs.chunks(2).map(|p| Ok((score(&p[0])?, p[1].clone()))).collect::<Result<Vec<_>, Failure>>()?;
                if self.sorted_set(key)?.is_none() {
                    let data = Data::SortedSet(HashMap::new());
                    self.entries.insert(key.to_vec(), Entry { data, expires_at: None });
                }
                let set = self.sorted_set(key)?.expect("just made");
                let added = scored.into_iter().filter(|(s, member)| set.insert(member.clone(), *s).is_none()).count();
                Value::Int(added as i64)
            }
            b"ZREM" => {
                let key = arg(1)?;
                let removed = self
                    .sorted_set(key)?
                    .map_or(0, |set| args[2..].iter().filter(|m| set.remove(*m).is_some()).count());
                self.drop_if_empty(key);
                Value::Int(removed as i64)
            }
            b"ZSCORE" => match self.sorted_set(arg(1)?)?.and_then(|set| set.get(arg(2).ok()?).copied()) {
                Some(s) => Value::BulkString(format_number(s).into_bytes()),
                None => Value::Nil,
            },
            b"ZCARD" => Value::Int(self.sorted_set(arg(1)?)?.map_or(0, |set| set.len()) as i64),
            b"ZRANGE" => {
                let members = self.ordered(arg(1)?)?;
                let len = members.len() as i64;
                let index = |n: i64| if n < 0 { (len + n).max(0) } else { n };
                let (start, stop) = (index(integer(arg(2)?)?), index(integer(arg(3)?)?).min(len - 1));
                let with_scores = args.get(4).is_some_and(|a| a.eq_ignore_ascii_case(b"WITHSCORES"));
                let mut out = Vec::new();
                for (member, s) in members.into_iter().take((stop + 1).max(0) as usize).skip(start as usize) {
                    out.push(Value::BulkString(member));
                    if with_scores {
                        out.push(Value::BulkString(format_number(s).into_bytes()));
                    }
                }
                Value::Array(out)
            }
            b"ZREMRANGEBYSCORE" => {
                let (key, min, max) = (arg(1)?, score(arg(2)?)?, score(arg(3)?)?);
                let removed = self.sorted_set(key)?.map_or(0, |set| {
                    let before = set.len();
                    set.retain(|_, s| *s < min || *s > max);
                    before - set.len()
                });
                self.drop_if_empty(key);
                Value::Int(removed as i64)
            }
            other => {
                return Err(format!(
                    "ERR unknown command '{}' (memory:// runs the scripts' commands only)",
                    String::from_utf8_lossy(other)
                ))
            }
        })
    }

    /// `SET key value [NX] [PX ms] [GET]`.
    fn set(&mut self, key: &[u8], value: &[u8], options: &[Vec<u8>]) -> Result<Value, Failure> {
        let (mut nx, mut get, mut px) = (false, false, None);
        let mut options = options.iter();
        while let Some(option) = options.next() {
            match option.to_ascii_uppercase().as_slice() {
                b"NX" => nx = true,
                b"GET" => get = true,
                b"PX" => px = Some(integer(options.next().ok_or("ERR syntax error")?)?),
                _ => return Err("ERR syntax error".to_owned()),
            }
        }
        let old = self.string(key)?.cloned();
        let reply = |set: bool| match (get, &old) {
            (true, Some(old)) => Value::BulkString(old.clone()),
            (true, None) => Value::Nil,
            (false, _) if set => Value::Okay,
            (false, _) => Value::Nil,
        };
        if nx && old.is_some() {
            return Ok(reply(false));
        }
        let expires_at = px.map(|ms| self.script_time + ms.max(0) as u64);
        self.entries.insert(key.to_vec(), Entry { data: Data::String(value.to_vec()), expires_at });
        Ok(reply(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(keyspace: &mut Keyspace, args: &[&str]) -> Value {
        keyspace.command(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn within_a_script_a_key_found_alive_does_not_expire() {
        let mut keyspace = Keyspace { script_time: now_ms(), ..Keyspace::default() };
        command(&mut keyspace, &["SET", "k", "v", "PX", "1"]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(command(&mut keyspace, &["GET", "k"]), Value::BulkString(b"v".to_vec()));
        assert_eq!(command(&mut keyspace, &["PTTL", "k"]), Value::Int(1));
        keyspace.script_time = now_ms();
        assert_eq!(command(&mut keyspace, &["PTTL", "k"]), Value::Int(-2), "the next script sees it expired");
    }
}
