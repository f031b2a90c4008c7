//! `memory://`: an in-process stand-in for one Redis server, so that users' tests of code that takes locks need no
//! server. It runs the very scripts a server runs (protocol/scripts, in an embedded Lua 5.1, Redis's version) one at
//! a time, over an in-memory keyspace that implements the commands they use (keyspace.rs). `TIME` and expiries follow this
//! process's clock; within a script, expiries are judged at the time it started, as on Redis, where time stands
//! still in a script. Lockers on the same `memory://` URL in one process share one store; it is not distributed.

use crate::server::keyspace::{format_number, now_ms, Keyspace};
use crate::server::script_call::ScriptCall;
use crate::server::waiters::WaiterMap;
use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};
use redis::{Arg, Value};
use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

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
