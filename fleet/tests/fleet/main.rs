//! Fleet mode (`breakerbox-fleet`, `breakerbox::fleet`) across processes: a real
//! `redis-server` and `fleet_node` processes (this crate's binary) driven over stdin. Each test
//! starts its own server on a free loopback port (persistence off) and its nodes, and polls with
//! deadlines: no test sleeps for an outcome.
//!
//! - `together` — trips, controls, probes and counts reach every instance;
//! - `acl` — under the least-privilege Redis user docs/fleet.md gives;
//! - `faults` — the store killed, stopped, partitioned, flushed; a subscriber that stops reading;
//! - `keyed` — a keyed family's keys shared: trips, per-key controls, new keys, records that
//!   expire, no load per idle key;
//! - `quorum` — quorum trips and the live set (`fleet_trip = "quorum"`);
//! - `numbers` — the measurements behind BENCHMARKS.md (ignored by default);
//! - `postgres` — the same fleet on PostgreSQL (feature `postgres`): trips and controls across
//!   processes, the server killed and restarted empty, stopped, a foreign row, the schema
//!   checked;
//! - `own_store` — a store of one's own through the public API (feature `conformance`): the
//!   conformance suite on it, and a fleet started on it sharing a trip with one on Redis;
//! - `tls`, `sentinel`, `cluster` — production setups (features of the same names), their
//!   servers started by `servers`, the instances in this process (`instances`).
//!
//! The fault tests and the measurements time their calls, so each runs
//! [`alone`](support::alone).

mod acl;
#[cfg(feature = "cluster")]
mod cluster;
mod faults;
mod instances;
mod keyed;
mod numbers;
#[cfg(feature = "conformance")]
mod own_store;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(all(feature = "postgres", feature = "tls"))]
mod postgres_tls;
mod quorum;
#[cfg(feature = "sentinel")]
mod sentinel;
mod servers;
mod support;
#[cfg(feature = "tls")]
mod tls;
mod together;
