//! Fleet mode: breakers shared by many processes and hosts through Redis, local first. Use it
//! through the `breakerbox` crate, as `breakerbox::fleet` (feature `redis`). `docs/fleet.md`
//! has the protocol, the guarantees and a three-node demo.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use breakerbox_fleet::{Fleet, FleetConfig};
//!
//! // In a tokio runtime, after `registry().load_toml(…)`:
//! let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/").share("payments*"))?;
//! // Every registry breaker named `payments…` now opens, closes, is forced open, disabled or
//! // reset on every instance when it does on one. Keep `fleet` alive as long as the process.
//! # drop(fleet); Ok(()) }
//! ```
//!
//! # How it works
//!
//! - **Local first.** Every call is decided by the local breaker, as without fleet mode: the
//!   call path reads nothing from the network and takes no lock of the fleet's. A shared
//!   breaker has one more state-change listener, which hands the change to a channel (no
//!   waiting) read by the fleet's background task; nothing is added to a call that changes no
//!   state.
//! - **One record per breaker, changed only by a script.** The hash `{<prefix>:<name>}` holds
//!   the state, an epoch, the open-until time in the Redis server's clock, the reopen count,
//!   the reason, the last failure and the instance the change came from. The script
//!   (`record.lua`, sent with `EVALSHA`) compares the caller's last-seen epoch with the record's
//!   and writes only if they match (manual control writes whatever the record holds), then
//!   publishes the new record on `<prefix>:changes`. No lock is held across a call.
//! - **Remote changes arrive asynchronously.** Each instance subscribes (RESP3 push messages on
//!   the connection manager's connection) and takes a newer record on as a transition of its
//!   local breaker ([`Breaker::import_state`](breakerbox_runtime::Breaker::import_state), reason
//!   [`Imported`](breakerbox_runtime::Reason::Imported)). Open times travel as "until T, and it is now N"
//!   on the server's clock, turned into a local remaining time, so host clock skew does not
//!   matter. Imported changes are never pushed back: no echo.
//! - **A failing store.** A store operation only ever delays the fleet's own task, by at most
//!   the [`timeout`](FleetConfig::timeout). While the store is unreachable, hung or
//!   partitioned, every instance keeps deciding alone with its local breaker (by default: see
//!   **Store policy** below); changes it makes meanwhile are kept (the latest per breaker) and
//!   pushed when the store answers again, if they still hold. The connection is retried with backoff; every shared record is read
//!   again after a reconnect and every [`resync_every`](FleetConfig::resync_every), because
//!   pub/sub loses messages. A record that vanished (`FLUSHALL`, a restart without persistence)
//!   is written again by the instances whose breaker is open, forced open or disabled.
//!
//! - **Fleet-wide half-open.** An open record is held one `probe_timeout` past its open time;
//!   then each instance asks `probe.lua` for leases: at most `half_open_calls` exist at once,
//!   one lease is one probe call ([`Breaker::set_probe_budget`](breakerbox_runtime::Breaker::set_probe_budget)),
//!   and the instances without one keep rejecting (see `lease.rs`).
//!
//! - **Store policy.** [`FleetConfig::on_store_error`]: while the store is unreachable, shared
//!   breakers decide locally (the default), or are held forced open, or disabled, and get
//!   their own state back when it answers, or the fleet's record published meanwhile
//!   ([`OnStoreError`]). Dropping the `Fleet`, or the runtime its task runs on, gives them
//!   back at once.
//!
//! - **One record's problem is that record's.** A value of another type under a breaker's key,
//!   or a record this instance cannot read, leaves that breaker alone (tried again with
//!   backoff, its local change kept for when the key is readable or empty); every other
//!   breaker goes on, and nothing is held for it. A foreign message on the channel is skipped.
//!
//! - **Fleet counts.** A failure-rate breaker over a time window also sends its judged calls
//!   and failures every 100 ms; a script sums the fleet's window and trips the record when the
//!   fleet's rate reaches the limit (see `counts.rs`). The counts are those of the current
//!   record: any write of it, a reset on any instance too, starts the window empty.
//!
//! - **Order.** The task reads the local changes queued for it before published records, so a
//!   record written before a local change is not taken on over it; a manual change a record
//!   was taken on over all the same (in the moment before its message) is written, and then
//!   taken on here too.
//!
//! - **Keyed families.** A family named in `share` shares each key: one record per key,
//!   expiring once the key is closed (`FleetConfig::key_ttl`), and per family a sorted set of
//!   the keys not closed, which the re-reads read instead of every key. A key made later on an
//!   instance takes the fleet's state before its first call (see `keys.rs`).
//!
//! - **Production Redis.** TLS (`rediss://`, feature `tls`), Sentinel (`redis+sentinel://`,
//!   feature `sentinel`), Cluster (`redis+cluster://`, feature `cluster`); [`Fleet::connect`]
//!   checks the connection at start (docs/fleet.md, "Production Redis").
//!
//! - **PostgreSQL instead.** With the feature `postgres`, a `postgres://` URL makes PostgreSQL
//!   the store: a row per record changed by SQL functions with the scripts' rules, and
//!   `LISTEN`/`NOTIFY` as the change feed; the tables are created or checked at every
//!   connection; `?sslmode=require` is TLS with the feature `tls` too, the server's certificate
//!   checked as `rediss://` checks Redis's (docs/fleet.md, "PostgreSQL as the store").
//!
//! - **A store of your own.** The task talks to the store only through one trait,
//!   [`store::FleetStore`] (Redis and PostgreSQL implement it): a store written in another
//!   crate, checked with the conformance suite (`store::conformance`, feature `conformance`),
//!   runs a fleet with [`Fleet::start_with_store`] (docs/fleet.md, "Writing a store of your
//!   own").
//!
//! Redis's implementation sends its commands over one seam (`Wire`), so a deterministic
//! simulator (`sim/`, tests only) runs several instances of this code against a model store
//! that runs the same Lua scripts, under seeded faults (docs/fleet.md, "What is guaranteed").
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod config;
mod connect;
mod error;
mod handle;
mod instances;
mod keys;
mod link;
mod record;
mod shared;
#[cfg(test)]
mod sim;
pub mod store;
mod task;
mod view;

pub use config::{FleetConfig, FleetConfigError, FleetTrip, OnStoreError, Quorum};
pub use error::FleetError;
pub use handle::{Fleet, FleetStatus};
pub use instances::{FleetBreaker, LiveInstance};
pub use link::{StoreConnection, StoreLink};
pub use view::FleetView;
