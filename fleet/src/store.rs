//! The fleet task's one door to the store: five scripts, `PING` and the subscription.
//!
//! The task talks to the store only through [`Store`], so the same task runs against Redis
//! (`RedisStore`, a `ConnectionManager`) in production and against the deterministic model
//! store of the simulator (`sim/`) in tests: every reply, error, delay and published message
//! the task sees comes through here or through its push channel.

use core::future::Future;
use core::pin::Pin;

use redis::{RedisResult, Value};
use tokio::sync::mpsc;

use crate::config::FleetConfig;
use crate::connect::{Connector, Handle, connector};
use crate::error::FleetError;

/// A store operation in flight.
pub(crate) type Reply<'a, T> = Pin<Box<dyn Future<Output = RedisResult<T>> + Send + 'a>>;

/// The fleet's Lua scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Script {
    /// `record.lua`: read, compare-and-set or force a record.
    Record,
    /// `probe.lua`: half-open probe leases.
    Probe,
    /// `count.lua`: the fleet's counts of a failure-rate breaker.
    Count,
    /// `quorum.lua`: a local trip reported under a quorum, which may open the record.
    Quorum,
    /// `heartbeat.lua`: a heartbeat with the instance's local state, and everyone's.
    Heartbeat,
}

impl Script {
    /// Every script, in `Script as usize` order.
    pub(crate) const ALL: [Script; 5] = [
        Script::Record,
        Script::Probe,
        Script::Count,
        Script::Quorum,
        Script::Heartbeat,
    ];

    /// The script's SHA-1, as `EVALSHA` names it.
    pub(crate) fn sha(self) -> &'static str {
        static SHAS: std::sync::LazyLock<[String; 5]> = std::sync::LazyLock::new(|| {
            Script::ALL.map(|s| redis::Script::new(s.source()).get_hash().to_owned())
        });
        &SHAS[self as usize]
    }

    /// The script's source.
    pub(crate) fn source(self) -> &'static str {
        match self {
            Script::Record => include_str!("record.lua"),
            Script::Probe => include_str!("probe.lua"),
            Script::Count => include_str!("count.lua"),
            Script::Quorum => include_str!("quorum.lua"),
            Script::Heartbeat => include_str!("heartbeat.lua"),
        }
    }
}

/// What the fleet's task asks of a store. Each operation may fail or never answer; the task
/// bounds each by its own timeout.
pub(crate) trait Store: Send + 'static {
    /// Runs `script` atomically over `keys` with `args`; its reply as the server sends it.
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value>;
    /// Sends `commands` (plain commands, no script) in one round trip, a pipeline: each
    /// one's reply or error, in order. The outer error is the store failing.
    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>>;
    /// `PING`.
    fn ping(&mut self) -> Reply<'_, ()>;
    /// Subscribes to `channel`; published messages arrive on the push channel given with the
    /// store, kept across reconnections.
    fn subscribe(&mut self, channel: String) -> Reply<'_, ()>;
}

pub(crate) use crate::connect::is_record_problem;

/// The production store: one connection at a time (RESP3, pushes on it) to one node, to the
/// master a Sentinel names, or to a Cluster (`connect.rs`).
pub(crate) struct RedisStore {
    con: Connector,
    scripts: [redis::Script; 5],
}

impl RedisStore {
    /// A store that connects on first use and again after each loss.
    pub(crate) fn new(con: Connector) -> RedisStore {
        RedisStore {
            con,
            scripts: Script::ALL.map(|s| redis::Script::new(s.source())),
        }
    }
}

/// `op` on the connector's connection; its end told to the connector.
async fn on<T, F>(con: &mut Connector, op: impl FnOnce(Handle) -> F) -> RedisResult<T>
where
    F: Future<Output = RedisResult<T>>,
{
    let result = match con.handle().await {
        Ok(handle) => op(handle).await,
        Err(e) => Err(e),
    };
    con.done(result.as_ref().err());
    result
}

impl Store for RedisStore {
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value> {
        let script = &self.scripts[script as usize];
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(k);
        }
        for a in args {
            invocation.arg(a);
        }
        // `EVALSHA`, loading the script again after `NOSCRIPT` (a restart, `SCRIPT FLUSH`).
        Box::pin(on(&mut self.con, move |mut con| async move {
            invocation.invoke_async::<Value>(&mut con).await
        }))
    }

    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>> {
        Box::pin(on(&mut self.con, move |mut con| async move {
            let cmd = |command: &Vec<String>| {
                let (name, args) = command.split_first().expect("a command has a name");
                let mut cmd = redis::cmd(name);
                cmd.arg(args);
                cmd
            };
            #[cfg(feature = "cluster")]
            if con.one_slot_pipelines() {
                // A Cluster pipeline cannot span slots: each command on its own, all at once.
                let replies = commands.iter().map(|command| {
                    let mut con = con.clone();
                    let cmd = cmd(command);
                    async move { cmd.query_async::<Value>(&mut con).await }
                });
                let replies = futures_util::future::join_all(replies).await;
                if let Some(Err(e)) = replies.iter().find(|r| {
                    r.as_ref().is_err_and(|e| {
                        !matches!(
                            e.kind(),
                            redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                        )
                    })
                }) {
                    return Err(e.clone());
                }
                return Ok(replies);
            }
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for command in &commands {
                pipe.add_command(cmd(command));
            }
            pipe.query_async(&mut con).await
        }))
    }

    fn ping(&mut self) -> Reply<'_, ()> {
        Box::pin(on(&mut self.con, |mut con| async move {
            redis::cmd("PING").query_async::<String>(&mut con).await?;
            Ok(())
        }))
    }

    fn subscribe(&mut self, channel: String) -> Reply<'_, ()> {
        Box::pin(self.con.subscribe(channel))
    }
}

/// The store `config` names, not connected yet.
pub(crate) fn production_store(
    config: &FleetConfig,
) -> Result<(RedisStore, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let (con, pushes) = connector(&config.url, config.tls_ca.as_deref(), config.timeout)?;
    Ok((RedisStore::new(con), pushes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::RedisError;

    fn error(resp: &str) -> RedisError {
        let v = redis::parse_redis_value(format!("-{resp}\r\n").as_bytes()).unwrap();
        v.extract_error().unwrap_err()
    }

    #[test]
    fn a_scripts_error_about_its_key_is_the_records_problem() {
        assert!(is_record_problem(&error(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 3f2a, on @user_script:27."
        )));
        assert!(is_record_problem(&error(
            "ERR user_script:38: attempt to perform arithmetic on a nil value script: 3f2a, on @user_script:38."
        )));
    }

    #[test]
    fn refusals_and_failures_are_the_stores() {
        assert!(!is_record_problem(&error(
            "NOPERM User fleet has no permissions to run the 'evalsha' command"
        )));
        assert!(!is_record_problem(&error("ERR unknown command 'EVALSHA'")));
        assert!(!is_record_problem(&error(
            "LOADING Redis is loading the dataset in memory"
        )));
        assert!(!is_record_problem(&error(
            "READONLY You can't write against a read only replica."
        )));
        assert!(!is_record_problem(&RedisError::from((
            redis::ErrorKind::Io,
            "connection reset"
        ))));
    }
}
