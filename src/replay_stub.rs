//! Stand-ins for `breakerbox_replay::__private` without the `replay` feature: the code that
//! `replay = …` generates type-checks against them, and `require_replay!` reports the missing
//! feature. Nothing here runs.
// Stand-ins with the shapes of the real items, nothing more.
#![allow(clippy::new_without_default, clippy::result_unit_err)]

use core::future::Future;
use core::marker::PhantomData;
use core::time::Duration;

use breakerbox_runtime::{Breaker, Rejected};

/// Stands in for the replay's slot.
pub struct ReplaySlot<A>(PhantomData<fn(A) -> A>);

impl<A> ReplaySlot<A> {
    /// Stands in for `ReplaySlot::new`.
    pub const fn new() -> Self {
        ReplaySlot(PhantomData)
    }

    /// Stands in for `ReplaySlot::start`: starts nothing.
    pub fn start(&'static self, _start: impl FnOnce() -> Result<Replay<A>, ()> + Send + 'static) {}

    /// Never started.
    pub fn get(&self) -> Option<&Replay<A>> {
        None
    }
}

/// Stands in for `journal_async`: gives the rejection back.
pub async fn journal_async<A>(
    _slot: &'static ReplaySlot<A>,
    rejected: Rejected,
    _call: impl FnOnce() -> (Option<String>, A),
) -> Rejected {
    rejected
}

/// Stands in for `Replay`.
pub struct Replay<A>(PhantomData<fn(A) -> A>);

impl<A> Replay<A> {
    /// Gives the rejection back.
    pub fn journal_keyed(&self, rejected: Rejected, _key: Option<String>, _args: A) -> Rejected {
        rejected
    }
}

/// Stands in for `ReplayConfig`.
pub struct ReplayConfig;

impl ReplayConfig {
    /// Stands in for `ReplayConfig::new`.
    pub fn new() -> Self {
        ReplayConfig
    }
    /// Stands in.
    pub fn max_entries(self, _n: usize) -> Self {
        self
    }
    /// Stands in.
    pub fn ttl(self, _ttl: Duration) -> Self {
        self
    }
    /// Stands in.
    pub fn rate(self, _n: u32) -> Self {
        self
    }
    /// Stands in.
    pub fn attempts(self, _n: u32) -> Self {
        self
    }
}

/// Stands in for `memory`.
pub fn memory<A, F: Fn(A) -> Fut, Fut: Future<Output = Result<(), String>>>(
    _breaker: &Breaker,
    _config: ReplayConfig,
    _replay: F,
) -> Result<Replay<A>, ()> {
    Err(())
}

/// Stands in for `disk`.
pub fn disk<A, F: Fn(A) -> Fut, Fut: Future<Output = Result<(), String>>>(
    _breaker: &Breaker,
    _config: ReplayConfig,
    _replay: F,
) -> Result<Replay<A>, ()> {
    Err(())
}

/// Stands in for `fleet`.
pub fn fleet<A, F: Fn(A) -> Fut, Fut: Future<Output = Result<(), String>>>(
    _breaker: &Breaker,
    _config: ReplayConfig,
    _claim_after: Option<Duration>,
    _replay: F,
) -> Result<Replay<A>, ()> {
    Err(())
}

/// Stands in for `fleet_arg`.
pub fn fleet_arg<T>(_: &T) {}

/// Stands in for `memory_arg`.
pub fn memory_arg<T>(_: &T) {}

/// Stands in for `disk_arg`.
pub fn disk_arg<T>(_: &T) {}

/// Stands in for `failure_message`.
pub fn failure_message(_cause: Option<&dyn core::fmt::Display>) -> String {
    String::new()
}
