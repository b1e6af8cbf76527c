//! The fleet's background task: the only code that talks to Redis.
//!
//! One loop, so every decision about a breaker is made in order: local changes from the
//! listeners (a channel), remote changes (push messages), and a timer that retries what is
//! pending and re-reads every record.
//!
//! The task is one type, [`Task`] (`state.rs`), whose methods each file of this folder adds:
//! the loop (`run.rs`), store operations and their answers (`ask.rs`), the store policy
//! (`hold.rs`), writing local changes (`push.rs`), re-reads (`resync.rs`), probe leases
//! (`lease.rs`), fleet counts (`counts.rs`) and quorums and heartbeats (`quorum.rs`).

mod ask;
mod counts;
mod hold;
mod lease;
mod push;
mod quorum;
mod resync;
mod run;
mod state;

pub(crate) use state::Task;

#[cfg(test)]
mod tests;
