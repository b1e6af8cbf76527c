//! Keyed families (`BreakerMap`): eviction and what is never evicted, the bounds, the overflow
//! breaker, events that name their key, racing threads whose counts add up exactly, and
//! breakers and keys that give their memory back.
//!
//! Several tests count the process's live breakers, so every test of this binary holds
//! `support::serial()`; the heap test runs alone in a process of its own. ManualClock
//! everywhere; nothing sleeps.

#[path = "../common/alone.rs"]
mod alone;
mod borrowed;
mod bounds;
#[allow(dead_code)]
#[path = "../breaker/support.rs"]
mod breaker_support;
mod called_again;
#[allow(dead_code)]
#[path = "../common/calls.rs"]
mod calls;
mod events;
mod eviction;
mod families;
mod freeing;
mod heap;
mod latency;
mod races;
mod support;
