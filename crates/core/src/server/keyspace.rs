//! The keyspace of a `memory://` store (memory.rs): strings, sorted sets, hashes and lists with their expiries, and
//! the commands the scripts run on them, answered as Redis answers them.

use crate::server::waiters::{wake, WaiterMap};
use redis::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Weak;
use std::time::{SystemTime, UNIX_EPOCH};

/// The keys and their values, and who hears of `PUBLISH`.
#[derive(Default)]
pub(crate) struct Keyspace {
    entries: HashMap<Vec<u8>, Entry>,
    /// The time expiries are judged by while a script runs (ms since the epoch): fixed at its start, as Redis has
    /// it, so that a key a script found cannot expire under it (its `PTTL` then answering -2, say).
    pub(crate) script_time: u64,
    /// The waiters of the nodes on this store (see waker.rs).
    pub(crate) listeners: Vec<Weak<WaiterMap>>,
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
    /// A hash: fields with their values.
    Hash(Fields),
    List(VecDeque<Vec<u8>>),
}

/// A command's failure, as Redis words it.
type Failure = String;

/// A hash's fields and their values.
type Fields = HashMap<Vec<u8>, Vec<u8>>;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A number as Redis's Lua writes one into a command: its integer digits when it has no fraction.
pub(crate) fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> u64 {
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

/// One end of a ZRANGEBYSCORE or ZCOUNT range: a score, `(score` (excluded), `-inf` or `+inf`.
#[derive(Clone, Copy)]
struct Bound {
    score: f64,
    excluded: bool,
}

impl Bound {
    fn of(arg: &[u8]) -> Result<Self, Failure> {
        match arg.strip_prefix(b"(") {
            Some(rest) => Ok(Self { score: score(rest)?, excluded: true }),
            None => Ok(Self { score: score(arg)?, excluded: false }),
        }
    }

    /// Whether `s` is above this lower end.
    fn below(self, s: f64) -> bool {
        if self.excluded {
            s > self.score
        } else {
            s >= self.score
        }
    }

    /// Whether `s` is below this upper end.
    fn above(self, s: f64) -> bool {
        if self.excluded {
            s < self.score
        } else {
            s <= self.score
        }
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

    /// Drops the sorted set, hash or list at `key` once it is empty, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        let empty = match self.entries.get(key).map(|entry| &entry.data) {
            Some(Data::SortedSet(set)) => set.is_empty(),
            Some(Data::Hash(hash)) => hash.is_empty(),
            Some(Data::List(list)) => list.is_empty(),
            _ => false,
        };
        if empty {
            self.entries.remove(key);
        }
    }

    /// Runs one command of a script.
    pub(crate) fn command(&mut self, args: &[Vec<u8>]) -> Result<Value, Failure> {
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
                    Some(Data::Hash(_)) => "hash",
                    Some(Data::List(_)) => "list",
                }
                .to_owned(),
            ),
            b"EXISTS" => Value::Int(args[1..].iter().filter(|key| self.live(key).is_some()).count() as i64),
            b"SCAN" => self.scan(&args[1..])?,
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
            b"PERSIST" => match self.live(arg(1)?) {
                Some(entry) if entry.expires_at.is_some() => {
                    entry.expires_at = None;
                    Value::Int(1)
                }
                _ => Value::Int(0),
            },
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
                let (channel, message) = (String::from_utf8_lossy(arg(1)?), String::from_utf8_lossy(arg(2)?));
                let listeners = self.listeners.iter().filter_map(Weak::upgrade);
                let woken: usize =
                    listeners.map(|w| wake(&w.lock().expect("waiters poisoned"), &channel, &message)).sum();
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
                let with_scores = args.get(4).is_some_and(|a| a.eq_ignore_ascii_case(b"WITHSCORES"));
                let mut out = Vec::new();
                for (member, s) in ranked(members, integer(arg(2)?)?, integer(arg(3)?)?) {
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
            b"ZREVRANGE" => {
                let mut members = self.ordered(arg(1)?)?;
                members.reverse();
                Value::Array(ranked(members, integer(arg(2)?)?, integer(arg(3)?)?).map(|(m, _)| bulk(m)).collect())
            }
            b"ZREMRANGEBYRANK" => {
                let key = arg(1)?;
                let gone: Vec<Vec<u8>> =
                    ranked(self.ordered(key)?, integer(arg(2)?)?, integer(arg(3)?)?).map(|(m, _)| m).collect();
                if let Some(set) = self.sorted_set(key)? {
                    for member in &gone {
                        set.remove(member);
                    }
                }
                self.drop_if_empty(key);
                Value::Int(gone.len() as i64)
            }
            b"ZRANGEBYSCORE" | b"ZCOUNT" => {
                let (min, max) = (Bound::of(arg(2)?)?, Bound::of(arg(3)?)?);
                let within = self.ordered(arg(1)?)?.into_iter().filter(|(_, s)| min.below(*s) && max.above(*s));
                if name.as_slice() == b"ZCOUNT" {
                    return Ok(Value::Int(within.count() as i64));
                }
                // Options: WITHSCORES, LIMIT offset count.
                let (mut with_scores, mut offset, mut count) = (false, 0, usize::MAX);
                let mut options = args[4..].iter();
                while let Some(option) = options.next() {
                    if option.eq_ignore_ascii_case(b"WITHSCORES") {
                        with_scores = true;
                    } else if option.eq_ignore_ascii_case(b"LIMIT") {
                        let (Some(from), Some(many)) = (options.next(), options.next()) else {
                            return Err("ERR syntax error".to_owned());
                        };
                        offset = usize::try_from(integer(from)?).unwrap_or(0);
                        count = usize::try_from(integer(many)?).unwrap_or(usize::MAX);
                    } else {
                        return Err("ERR syntax error".to_owned());
                    }
                }
                let mut out = Vec::new();
                for (member, s) in within.skip(offset).take(count) {
                    out.push(bulk(member));
                    if with_scores {
                        out.push(Value::BulkString(format_number(s).into_bytes()));
                    }
                }
                Value::Array(out)
            }
            b"HSET" | b"HSETNX" => {
                let (key, pairs) = (arg(1)?, &args[2..]);
                if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
                    return Err("ERR wrong number of arguments".to_owned());
                }
                let only_new = name.as_slice() == b"HSETNX";
                let hash = self.hash_or_new(key)?;
                let mut added = 0;
                for pair in pairs.chunks(2) {
                    let is_new = !hash.contains_key(&pair[0]);
                    if is_new || !only_new {
                        hash.insert(pair[0].clone(), pair[1].clone());
                    }
                    added += i64::from(is_new);
                }
                Value::Int(added)
            }
            b"HGET" => self.hash(arg(1)?)?.and_then(|h| h.get(arg(2).ok()?).cloned()).map_or(Value::Nil, bulk),
            b"HMGET" => {
                let hash = self.hash(arg(1)?)?.cloned().unwrap_or_default();
                Value::Array(args[2..].iter().map(|f| hash.get(f).cloned().map_or(Value::Nil, bulk)).collect())
            }
            b"HGETALL" => {
                let hash = self.hash(arg(1)?)?.cloned().unwrap_or_default();
                Value::Array(hash.into_iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect())
            }
            b"HDEL" => {
                let key = arg(1)?;
                let deleted =
                    self.hash(key)?.map_or(0, |h| args[2..].iter().filter(|f| h.remove(*f).is_some()).count());
                self.drop_if_empty(key);
                Value::Int(deleted as i64)
            }
            b"HINCRBY" => {
                let (field, by) = (arg(2)?, integer(arg(3)?)?);
                let hash = self.hash_or_new(arg(1)?)?;
                let now = hash.get(field).map_or(Ok(0), |v| integer(v))?;
                let next = now.checked_add(by).ok_or("ERR increment or decrement would overflow")?;
                hash.insert(field.to_vec(), next.to_string().into_bytes());
                Value::Int(next)
            }
            b"RPUSH" => {
                let key = arg(1)?;
                if self.list(key)?.is_none() {
                    self.entries.insert(key.to_vec(), Entry { data: Data::List(VecDeque::new()), expires_at: None });
                }
                let list = self.list(key)?.expect("just made");
                list.extend(args[2..].iter().cloned());
                Value::Int(list.len() as i64)
            }
            b"LPOP" => {
                let key = arg(1)?;
                let popped = self.list(key)?.and_then(VecDeque::pop_front);
                self.drop_if_empty(key);
                popped.map_or(Value::Nil, bulk)
            }
            b"LLEN" => Value::Int(self.list(arg(1)?)?.map_or(0, |list| list.len()) as i64),
            other => {
                return Err(format!(
                    "ERR unknown command '{}' (memory:// runs the scripts' commands only)",
                    String::from_utf8_lossy(other)
                ))
            }
        })
    }

    /// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]`, answered in one go (cursor 0): every live key that
    /// matches.
    fn scan(&mut self, args: &[Vec<u8>]) -> Result<Value, Failure> {
        let (mut pattern, mut kind) = (None, None);
        let mut options = args.iter().skip(1);
        while let Some(option) = options.next() {
            let value = options.next().ok_or("ERR syntax error")?;
            match option.to_ascii_uppercase().as_slice() {
                b"MATCH" => pattern = Some(value.clone()),
                b"TYPE" => kind = Some(value.to_ascii_lowercase()),
                b"COUNT" => {}
                _ => return Err("ERR syntax error".to_owned()),
            }
        }
        let now = self.script_time;
        self.entries.retain(|_, entry| entry.expires_at.is_none_or(|at| at > now));
        let keys = self
            .entries
            .iter()
            .filter(|(key, entry)| {
                pattern.as_ref().is_none_or(|p| glob(p, key))
                    && kind.as_deref().is_none_or(|k| k == entry.data.kind().as_bytes())
            })
            .map(|(key, _)| bulk(key.clone()))
            .collect();
        Ok(Value::Array(vec![bulk(b"0".to_vec()), Value::Array(keys)]))
    }

    /// The hash at `key`: `None` when there is none, an error when the key holds another type.
    fn hash(&mut self, key: &[u8]) -> Result<Option<&mut Fields>, Failure> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry { data: Data::Hash(hash), .. }) => Ok(Some(hash)),
            Some(_) => Err(WRONGTYPE.to_owned()),
        }
    }

    /// The hash at `key`, made empty if there is none.
    fn hash_or_new(&mut self, key: &[u8]) -> Result<&mut Fields, Failure> {
        if self.hash(key)?.is_none() {
            self.entries.insert(key.to_vec(), Entry { data: Data::Hash(HashMap::new()), expires_at: None });
        }
        Ok(self.hash(key)?.expect("just made"))
    }

    /// The list at `key`: `None` when there is none, an error when the key holds another type.
    fn list(&mut self, key: &[u8]) -> Result<Option<&mut VecDeque<Vec<u8>>>, Failure> {
        match self.live(key) {
            None => Ok(None),
            Some(Entry { data: Data::List(list), .. }) => Ok(Some(list)),
            Some(_) => Err(WRONGTYPE.to_owned()),
        }
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

/// The items of `items` from rank `start` to rank `stop` (both included; negative ranks count from the end), as
/// Redis's rank ranges take them.
fn ranked<T>(items: Vec<T>, start: i64, stop: i64) -> impl Iterator<Item = T> {
    let len = items.len() as i64;
    let index = |n: i64| if n < 0 { (len + n).max(0) } else { n };
    let (start, stop) = (index(start), index(stop).min(len - 1));
    items.into_iter().take((stop + 1).max(0) as usize).skip(start as usize)
}

/// A bulk string reply.
fn bulk(bytes: Vec<u8>) -> Value {
    Value::BulkString(bytes)
}

/// Whether `key` matches the glob `pattern` as `SCAN MATCH` has it: `*`, `?`, `[…]` (with `^` and ranges) and `\`.
fn glob(pattern: &[u8], key: &[u8]) -> bool {
    match pattern.split_first() {
        None => key.is_empty(),
        Some((b'*', rest)) => (0..=key.len()).any(|at| glob(rest, &key[at..])),
        Some((b'?', rest)) => !key.is_empty() && glob(rest, &key[1..]),
        Some((b'[', rest)) => {
            let Some(end) = rest.iter().position(|&c| c == b']') else { return false };
            let (set, rest) = (&rest[..end], &rest[end + 1..]);
            let (negated, set) = match set.split_first() {
                Some((b'^', set)) => (true, set),
                _ => (false, set),
            };
            let Some((&c, key_rest)) = key.split_first() else { return false };
            let mut hit = false;
            let mut at = 0;
            while at < set.len() {
                if at + 2 < set.len() && set[at + 1] == b'-' {
                    hit |= (set[at]..=set[at + 2]).contains(&c);
                    at += 3;
                } else {
                    hit |= set[at] == c;
                    at += 1;
                }
            }
            hit != negated && glob(rest, key_rest)
        }
        Some((b'\\', rest)) if !rest.is_empty() => key.first() == Some(&rest[0]) && glob(&rest[1..], &key[1..]),
        Some((&c, rest)) => key.first() == Some(&c) && glob(rest, &key[1..]),
    }
}

impl Data {
    /// Its type, as `TYPE` names it.
    fn kind(&self) -> &'static str {
        match self {
            Self::String(_) => "string",
            Self::SortedSet(_) => "zset",
            Self::Hash(_) => "hash",
            Self::List(_) => "list",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(keyspace: &mut Keyspace, args: &[&str]) -> Value {
        keyspace.command(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn hashes_lists_and_ranks_answer_as_redis_does() {
        let mut keyspace = Keyspace { script_time: now_ms(), ..Keyspace::default() };
        assert_eq!(command(&mut keyspace, &["HSET", "h", "a", "1", "b", "2"]), Value::Int(2));
        assert_eq!(command(&mut keyspace, &["HSETNX", "h", "a", "9"]), Value::Int(0));
        assert_eq!(command(&mut keyspace, &["HINCRBY", "h", "a", "-3"]), Value::Int(-2));
        assert_eq!(
            command(&mut keyspace, &["HMGET", "h", "b", "z"]),
            Value::Array(vec![bulk(b"2".to_vec()), Value::Nil])
        );
        assert_eq!(command(&mut keyspace, &["HDEL", "h", "a", "b"]), Value::Int(2));
        assert_eq!(command(&mut keyspace, &["TYPE", "h"]), Value::SimpleString("none".into()), "an empty hash is gone");
        command(&mut keyspace, &["RPUSH", "l", "x", "y"]);
        assert_eq!(command(&mut keyspace, &["LPOP", "l"]), bulk(b"x".to_vec()));
        assert_eq!(command(&mut keyspace, &["LLEN", "l"]), Value::Int(1));
        command(&mut keyspace, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
        assert_eq!(
            command(&mut keyspace, &["ZREVRANGE", "z", "0", "1"]),
            Value::Array(vec![bulk(b"c".to_vec()), bulk(b"b".to_vec())])
        );
        assert_eq!(command(&mut keyspace, &["ZCOUNT", "z", "2", "+inf"]), Value::Int(2));
        assert_eq!(command(&mut keyspace, &["ZREMRANGEBYRANK", "z", "0", "0"]), Value::Int(1));
        assert_eq!(
            command(&mut keyspace, &["ZRANGEBYSCORE", "z", "-inf", "2"]),
            Value::Array(vec![bulk(b"b".to_vec())])
        );
        command(&mut keyspace, &["ZADD", "z", "4", "d", "5", "e"]);
        assert_eq!(
            command(&mut keyspace, &["ZRANGEBYSCORE", "z", "(2", "+inf", "WITHSCORES", "LIMIT", "0", "1"]),
            Value::Array(vec![bulk(b"c".to_vec()), bulk(b"3".to_vec())])
        );
        assert_eq!(command(&mut keyspace, &["ZCOUNT", "z", "(2", "(5"]), Value::Int(2));
        let scan = command(&mut keyspace, &["SCAN", "0", "MATCH", "[lz]", "TYPE", "zset"]);
        assert_eq!(scan, Value::Array(vec![bulk(b"0".to_vec()), Value::Array(vec![bulk(b"z".to_vec())])]));
    }

    #[test]
    fn globs_match_as_scan_has_them() {
        for (pattern, key, hit) in [
            ("snatch:*", "snatch:a:b", true),
            ("snatch:?", "snatch:ab", false),
            ("a[b-d]e", "ace", true),
            ("a[^b]e", "abe", false),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
        ] {
            assert_eq!(glob(pattern.as_bytes(), key.as_bytes()), hit, "{pattern} {key}");
        }
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
