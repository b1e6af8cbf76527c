//! The model store: a keyspace that runs the fleet's own Lua scripts (Lua 5.1, as Redis does)
//! atomically, with Redis's conversions between Lua and replies, `TIME` from the simulation's
//! clock, key expiry, type errors (`WRONGTYPE`) and `PUBLISH`.
//!
//! It models what the fleet's scripts rely on, and nothing else: the eleven commands they call,
//! each with Redis's reply shape (a missing field is `false` in Lua, scores are strings), and a
//! script's error as the server words it (`ERR user_script:…` for a Lua error, the command's own
//! error for one `redis.call` raised).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mlua::{Lua, MultiValue, Value as Lua51};
use redis::{RedisResult, Value};

use crate::store::Script;

/// A hash's fields, and a sorted set's members and scores.
type Fields = BTreeMap<Vec<u8>, Vec<u8>>;
type Members = BTreeMap<Vec<u8>, f64>;
/// What a script published: `(channel, payload)`.
pub(super) type Published = Vec<(Vec<u8>, Vec<u8>)>;

/// A value under a key.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Val {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, f64>),
}

/// The keys, their expiry, and what scripts published, for the network to deliver.
#[derive(Default)]
pub(super) struct Keyspace {
    pub(super) keys: BTreeMap<Vec<u8>, (Val, Option<u64>)>,
    /// The server's time in ms, set before each script runs.
    pub(super) now_ms: u64,
    /// Microseconds within that millisecond (for `TIME`).
    pub(super) now_us: u64,
    /// `(channel, payload)` published by the script that ran last.
    pub(super) published: Vec<(Vec<u8>, Vec<u8>)>,
    /// The error the last failing `redis.call` raised, as the server words it.
    raised: Option<String>,
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Keyspace {
    fn live(&mut self, key: &[u8]) -> Option<&mut Val> {
        let now = self.now_ms;
        if self
            .keys
            .get(key)
            .is_some_and(|(_, exp)| exp.is_some_and(|e| e <= now))
        {
            self.keys.remove(key);
        }
        self.keys.get_mut(key).map(|(v, _)| v)
    }

    fn hash(&mut self, key: &[u8], create: bool) -> Result<Option<&mut Fields>, String> {
        if self.live(key).is_none() {
            if !create {
                return Ok(None);
            }
            self.keys
                .insert(key.to_vec(), (Val::Hash(BTreeMap::new()), None));
        }
        match self.live(key) {
            Some(Val::Hash(h)) => Ok(Some(h)),
            _ => Err(WRONGTYPE.to_owned()),
        }
    }

    fn zset(&mut self, key: &[u8], create: bool) -> Result<Option<&mut Members>, String> {
        if self.live(key).is_none() {
            if !create {
                return Ok(None);
            }
            self.keys
                .insert(key.to_vec(), (Val::ZSet(BTreeMap::new()), None));
        }
        match self.live(key) {
            Some(Val::ZSet(z)) => Ok(Some(z)),
            _ => Err(WRONGTYPE.to_owned()),
        }
    }

    /// Drops a hash or sorted set left empty, as Redis does.
    fn tidy(&mut self, key: &[u8]) {
        let empty = match self.keys.get(key) {
            Some((Val::Hash(h), _)) => h.is_empty(),
            Some((Val::ZSet(z), _)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.keys.remove(key);
        }
    }

    /// One `redis.call`: its reply, or its error as the server words it.
    fn command(&mut self, argv: &[Vec<u8>]) -> Result<Reply, String> {
        let name = argv
            .first()
            .map(|c| String::from_utf8_lossy(c).to_ascii_uppercase())
            .unwrap_or_default();
        let arg = |i: usize| -> Result<&[u8], String> {
            argv.get(i)
                .map(Vec::as_slice)
                .ok_or_else(|| format!("ERR wrong number of arguments for '{name}' command"))
        };
        let int = |b: &[u8]| -> Result<i64, String> {
            core::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "ERR value is not an integer or out of range".to_owned())
        };
        let score = |b: &[u8]| -> Result<f64, String> {
            match b {
                b"-inf" => Ok(f64::NEG_INFINITY),
                b"+inf" | b"inf" => Ok(f64::INFINITY),
                _ => core::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| "ERR min or max is not a float".to_owned()),
            }
        };
        Ok(match name.as_str() {
            "TIME" => Reply::Array(vec![
                Reply::Bulk((self.now_ms / 1000).to_string().into_bytes()),
                Reply::Bulk(
                    ((self.now_ms % 1000) * 1000 + self.now_us)
                        .to_string()
                        .into_bytes(),
                ),
            ]),
            "HMGET" => {
                let key = arg(1)?.to_vec();
                let h = self.hash(&key, false)?;
                Reply::Array(
                    argv[2..]
                        .iter()
                        .map(|f| match h.as_ref().and_then(|h| h.get(f)) {
                            Some(v) => Reply::Bulk(v.clone()),
                            None => Reply::Nil,
                        })
                        .collect(),
                )
            }
            "HGETALL" => {
                let key = arg(1)?.to_vec();
                let h = self.hash(&key, false)?;
                let mut out = Vec::new();
                for (f, v) in h.into_iter().flatten() {
                    out.push(Reply::Bulk(f.clone()));
                    out.push(Reply::Bulk(v.clone()));
                }
                Reply::Array(out)
            }
            "HSET" => {
                let key = arg(1)?.to_vec();
                if argv.len() < 4 || !argv.len().is_multiple_of(2) {
                    return Err("ERR wrong number of arguments for 'hset' command".to_owned());
                }
                let h = self.hash(&key, true)?.expect("created");
                let mut added = 0;
                for pair in argv[2..].chunks(2) {
                    if h.insert(pair[0].clone(), pair[1].clone()).is_none() {
                        added += 1;
                    }
                }
                Reply::Int(added)
            }
            "HDEL" => {
                let key = arg(1)?.to_vec();
                let mut n = 0;
                if let Some(h) = self.hash(&key, false)? {
                    for f in &argv[2..] {
                        n += i64::from(h.remove(f).is_some());
                    }
                }
                self.tidy(&key);
                Reply::Int(n)
            }
            "DEL" => {
                let mut n = 0;
                for k in &argv[1..] {
                    n += i64::from(self.live(k).is_some());
                    self.keys.remove(k);
                }
                Reply::Int(n)
            }
            "PUBLISH" => {
                self.published.push((arg(1)?.to_vec(), arg(2)?.to_vec()));
                Reply::Int(1)
            }
            "ZREMRANGEBYSCORE" => {
                let key = arg(1)?.to_vec();
                let (min, max) = (score(arg(2)?)?, score(arg(3)?)?);
                let mut n = 0;
                if let Some(z) = self.zset(&key, false)? {
                    let before = z.len();
                    z.retain(|_, s| *s < min || *s > max);
                    n = (before - z.len()) as i64;
                }
                self.tidy(&key);
                Reply::Int(n)
            }
            "ZSCORE" => {
                let key = arg(1)?.to_vec();
                let member = arg(2)?.to_vec();
                match self
                    .zset(&key, false)?
                    .and_then(|z| z.get(&member).copied())
                {
                    Some(s) => Reply::Bulk(fmt_score(s).into_bytes()),
                    None => Reply::Nil,
                }
            }
            "ZREM" => {
                let key = arg(1)?.to_vec();
                let mut n = 0;
                if let Some(z) = self.zset(&key, false)? {
                    for m in &argv[2..] {
                        n += i64::from(z.remove(m).is_some());
                    }
                }
                self.tidy(&key);
                Reply::Int(n)
            }
            "PERSIST" => {
                let key = arg(1)?.to_vec();
                self.live(&key);
                match self.keys.get_mut(&key) {
                    Some((_, exp @ Some(_))) => {
                        *exp = None;
                        Reply::Int(1)
                    }
                    _ => Reply::Int(0),
                }
            }
            "ZCARD" => {
                let key = arg(1)?.to_vec();
                Reply::Int(self.zset(&key, false)?.map_or(0, |z| z.len() as i64))
            }
            "ZADD" => {
                let key = arg(1)?.to_vec();
                let s = score(arg(2)?)?;
                let member = arg(3)?.to_vec();
                let z = self.zset(&key, true)?.expect("created");
                Reply::Int(i64::from(z.insert(member, s).is_none()))
            }
            "ZRANGE" => {
                let key = arg(1)?.to_vec();
                let (start, stop) = (int(arg(2)?)?, int(arg(3)?)?);
                let with = argv
                    .get(4)
                    .is_some_and(|w| w.eq_ignore_ascii_case(b"WITHSCORES"));
                let mut members: Vec<(Vec<u8>, f64)> = self
                    .zset(&key, false)?
                    .map(|z| z.iter().map(|(m, s)| (m.clone(), *s)).collect())
                    .unwrap_or_default();
                members.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                let len = members.len() as i64;
                let norm = |i: i64| if i < 0 { (len + i).max(0) } else { i };
                let (start, stop) = (norm(start), norm(stop).min(len - 1));
                let mut out = Vec::new();
                if start <= stop {
                    for (m, s) in &members[start as usize..=stop as usize] {
                        out.push(Reply::Bulk(m.clone()));
                        if with {
                            out.push(Reply::Bulk(fmt_score(*s).into_bytes()));
                        }
                    }
                }
                Reply::Array(out)
            }
            "PEXPIRE" => {
                let key = arg(1)?.to_vec();
                let ms = int(arg(2)?)?;
                let at = self.now_ms.saturating_add(ms.max(0) as u64);
                match self.keys.get_mut(&key) {
                    Some((_, exp)) if self.now_ms < at || ms > 0 => {
                        *exp = Some(at);
                        Reply::Int(1)
                    }
                    _ => Reply::Int(0),
                }
            }
            other => return Err(format!("ERR unknown command '{other}'")),
        })
    }
}

/// A score as Redis prints it (`%.17g`: integers without a fraction).
fn fmt_score(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e17 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

/// A command's reply, before it is turned into a Lua value.
enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
}

/// The model server: the keyspace, and a Lua state with the fleet's scripts loaded.
pub(super) struct Model {
    pub(super) space: Arc<Mutex<Keyspace>>,
    lua: Lua,
    scripts: [mlua::Function; 5],
}

impl Model {
    pub(super) fn new() -> Model {
        let space = Arc::new(Mutex::new(Keyspace::default()));
        let lua = Lua::new();
        let redis = lua.create_table().expect("a table");
        let inner = space.clone();
        let call = lua
            .create_function(move |lua, args: MultiValue| {
                let argv: Vec<Vec<u8>> = args.iter().map(arg_bytes).collect();
                let mut space = inner.lock().unwrap();
                match space.command(&argv) {
                    Ok(reply) => to_lua(lua, reply),
                    Err(e) => {
                        space.raised = Some(e.clone());
                        Err(mlua::Error::RuntimeError(e))
                    }
                }
            })
            .expect("a function");
        redis.set("call", call).expect("set");
        lua.globals().set("redis", redis).expect("set");
        let scripts = Script::ALL.map(|s| {
            lua.load(s.source())
                .set_name(format!("@user_script:{s:?}"))
                .into_function()
                .expect("the fleet's scripts are valid Lua 5.1")
        });
        Model {
            space,
            lua,
            scripts,
        }
    }

    /// Runs plain `commands` at server time `now_ms`, one after another: each one's reply as a
    /// client reads it.
    pub(super) fn command(
        &self,
        commands: &[Vec<String>],
        now_ms: u64,
        now_us: u64,
    ) -> Vec<RedisResult<Value>> {
        let mut space = self.space.lock().unwrap();
        space.now_ms = now_ms;
        space.now_us = now_us;
        commands
            .iter()
            .map(|c| {
                let argv: Vec<Vec<u8>> = c.iter().map(|a| a.as_bytes().to_vec()).collect();
                match space.command(&argv) {
                    Ok(reply) => Ok(to_value(reply)),
                    Err(e) => error(&e),
                }
            })
            .collect()
    }

    /// Runs `script` atomically at server time `now_ms`; its reply as a client reads it, and
    /// what it published.
    pub(super) fn eval(
        &self,
        script: Script,
        keys: &[String],
        args: &[String],
        now_ms: u64,
        now_us: u64,
    ) -> (RedisResult<Value>, Published) {
        {
            let mut space = self.space.lock().unwrap();
            space.now_ms = now_ms;
            space.now_us = now_us;
            space.published.clear();
            space.raised = None;
        }
        let set = |name: &str, items: &[String]| {
            let t = self.lua.create_table().expect("a table");
            for (i, v) in items.iter().enumerate() {
                t.set(i + 1, self.lua.create_string(v).expect("a string"))
                    .expect("set");
            }
            self.lua.globals().set(name, t).expect("set");
        };
        set("KEYS", keys);
        set("ARGV", args);
        let result = self.scripts[script as usize].call::<Lua51>(());
        let mut space = self.space.lock().unwrap();
        let reply = match result {
            Ok(v) => from_lua(&v),
            Err(e) => {
                // Redis keeps the writes a script made before it failed; so does the model.
                let text = match space.raised.take() {
                    Some(raised) => format!("{raised} script: sim, on @user_script:1."),
                    None => format!("ERR user_script:1: {} script: sim", first_line(&e)),
                };
                error(&text)
            }
        };
        let published = core::mem::take(&mut space.published);
        (reply, published)
    }
}

fn first_line(e: &mlua::Error) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .replace('\r', " ")
}

/// An error reply, parsed from its RESP form as a client parses the server's.
pub(super) fn error(text: &str) -> RedisResult<Value> {
    let line = text.replace(['\r', '\n'], " ");
    redis::parse_redis_value(format!("-{line}\r\n").as_bytes())?.extract_error()
}

/// A command's reply as a client reads it.
fn to_value(reply: Reply) -> Value {
    match reply {
        Reply::Nil => Value::Nil,
        Reply::Int(i) => Value::Int(i),
        Reply::Bulk(b) => Value::BulkString(b),
        Reply::Array(items) => Value::Array(items.into_iter().map(to_value).collect()),
    }
}

/// A `redis.call` argument as Redis reads it: strings as they are, numbers printed.
fn arg_bytes(v: &Lua51) -> Vec<u8> {
    match v {
        Lua51::String(s) => s.as_bytes().to_vec(),
        Lua51::Integer(i) => i.to_string().into_bytes(),
        Lua51::Number(n) => fmt_score(*n).into_bytes(),
        Lua51::Boolean(b) => {
            if *b {
                b"1".to_vec()
            } else {
                b"0".to_vec()
            }
        }
        _ => Vec::new(),
    }
}

/// A command's reply as a script sees it: a missing value is `false`.
fn to_lua(lua: &Lua, reply: Reply) -> mlua::Result<Lua51> {
    Ok(match reply {
        Reply::Nil => Lua51::Boolean(false),
        Reply::Int(i) => Lua51::Integer(i),
        Reply::Bulk(b) => Lua51::String(lua.create_string(&b)?),
        Reply::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.into_iter().enumerate() {
                t.set(i + 1, to_lua(lua, item)?)?;
            }
            Lua51::Table(t)
        }
    })
}

/// A script's return value as the client reads it: numbers truncated to integers, strings as
/// bulk strings, a table as an array up to its first nil, `false` as nil.
fn from_lua(v: &Lua51) -> RedisResult<Value> {
    Ok(match v {
        Lua51::Nil | Lua51::Boolean(false) => Value::Nil,
        Lua51::Boolean(true) => Value::Int(1),
        Lua51::Integer(i) => Value::Int(*i),
        Lua51::Number(n) => Value::Int(*n as i64),
        Lua51::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        Lua51::Table(t) => {
            if let Ok(Lua51::String(e)) = t.raw_get::<Lua51>("err") {
                return error(&e.to_string_lossy());
            }
            let mut out = Vec::new();
            for i in 1.. {
                match t.raw_get::<Lua51>(i) {
                    Ok(Lua51::Nil) | Err(_) => break,
                    Ok(item) => out.push(from_lua(&item)?),
                }
            }
            Value::Array(out)
        }
        _ => Value::Nil,
    })
}
