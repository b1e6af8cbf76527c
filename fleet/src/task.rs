//! The fleet's background task: the only code that talks to Redis.
//!
//! One loop, so every decision about a breaker is made in order: local changes from the
//! listeners (a channel), remote changes (push messages), and a timer that retries what is
//! pending and re-reads every record.
//!
//! The task is one type, [`Task`], whose methods each file of this folder adds. The files are
//! floors, bottom up: each calls only methods (and uses only items) of the files on the floors
//! below it, never of one beside or above it.
//!
//! 1. `state.rs`: the type, what it tracks per breaker, and its keys.
//! 2. `breakers.rs`: the tracked breakers, and how a state or a record is taken on by them.
//! 3. `hold.rs`: the store policy, breakers held while the store fails and given back.
//! 4. `ask.rs`: store operations and what their answers mean (a failure holds, by `hold.rs`).
//! 5. `intake.rs`, `lease.rs`, `counts.rs`: the listeners' and the store's messages taken in,
//!    probe leases, fleet counts (none calls another).
//! 6. `quorum.rs`: quorum reports and heartbeats.
//! 7. `push.rs`: writing local changes (a trip under a quorum is reported, by `quorum.rs`).
//! 8. `resync.rs`: the periodic re-read.
//! 9. `run.rs`: the loop.

mod ask;
mod breakers;
mod counts;
mod hold;
mod intake;
mod lease;
mod push;
mod quorum;
mod resync;
mod run;
mod state;

pub(crate) use state::Task;

#[cfg(test)]
mod tests;
