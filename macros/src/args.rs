//! The attribute's model: [`Args`], a typed config that keeps the span of every key and
//! value, and [`Errors`], the list every stage reports into.
//!
//! Nothing here reads tokens or checks anything. `parse` fills an `Args` from the tokens,
//! `valid` checks its keys against each other, `func` checks the function against it, and
//! `expand` turns it into code.

use proc_macro2::Span;
use syn::{Expr, ExprPath, LitStr, Path};

/// Every key the attribute accepts, in the order the docs list them.
pub(crate) const KEYS: &[&str] = &[
    "name",
    "key",
    "config",
    "failures",
    "failures_within",
    "failure_rate",
    "window",
    "min_calls",
    "slow",
    "slow_rate",
    "open_for",
    "max_open_for",
    "backoff",
    "jitter",
    "half_open_calls",
    "successes",
    "probe_timeout",
    "max_concurrent",
    "probe_every",
    "max_keys",
    "idle_for",
    "latency",
    "health",
    "critical",
    "timeout",
    "fallback",
    "fallback_with_reason",
    "fallback_on",
    "classify",
    "probe",
    "replay",
    "replay_key",
    "replay_max",
    "replay_ttl",
    "replay_rate",
    "replay_attempts",
    "replay_claim_after",
    "crate",
];

/// The runtime's defaults, for checks that involve a key the user left out.
pub(crate) mod defaults {
    pub(crate) const OPEN_FOR_NANOS: u64 = 60 * 1_000_000_000;
    pub(crate) const HALF_OPEN_CALLS: u32 = 1;
    pub(crate) const WINDOW_CALLS: u32 = 100;
}

/// A value together with the spans of its key and of the value itself.
pub(crate) struct Key<T> {
    /// The key, e.g. `failures` in `failures = 5`: where combination errors point.
    pub(crate) key: Span,
    /// The value, e.g. `5`: where value errors point.
    pub(crate) span: Span,
    pub(crate) value: T,
}

/// The sliding window of the rate policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Window {
    /// The last N calls.
    Calls(u32),
    /// The calls of the last N nanoseconds.
    Time(u64),
}

/// When the fallback answers (`fallback_on = "…"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FallbackOn {
    /// Rejected and timed-out calls: the default.
    Rejected,
    /// Those, and calls that ran and failed (an `Err` recorded as a failure, or an outcome
    /// `classify` calls a failure).
    Error,
}

/// The breaker's name: a string literal, or a `&str` constant shared by several functions.
pub(crate) enum Name {
    /// `name = "users"`, checked to be non-empty.
    Literal(LitStr),
    /// `name = names::USERS` or `name = concat!(…)`: any `&'static str` expression that can
    /// be evaluated in a static's initializer; the compiler checks its type.
    Expr(Expr),
}

/// Where `replay = …` journals rejected calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Journal {
    /// `replay = "memory"`.
    Memory,
    /// `replay = "disk"`: a file per breaker under `$BREAKERBOX_REPLAY_DIR`.
    Disk,
    /// `replay = "fleet"`: the running fleet's Redis, one journal for every instance.
    Fleet,
}

/// The validated attribute.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) name: Option<Key<Name>>,
    /// `key = expr`: a breaker per distinct value of `expr`, an expression over the
    /// function's arguments (type-checked by the compiler where it is written).
    pub(crate) key: Option<Key<Expr>>,
    /// `config = "<name>"`: the `[configs.<name>]` table of a config file under the
    /// attribute's keys.
    pub(crate) config: Option<Key<LitStr>>,
    pub(crate) failures: Option<Key<u32>>,
    pub(crate) failures_within: Option<Key<u64>>,
    pub(crate) failure_rate: Option<Key<u8>>,
    pub(crate) window: Option<Key<Window>>,
    pub(crate) min_calls: Option<Key<u32>>,
    pub(crate) slow: Option<Key<u64>>,
    pub(crate) slow_rate: Option<Key<u8>>,
    pub(crate) open_for: Option<Key<u64>>,
    pub(crate) max_open_for: Option<Key<u64>>,
    pub(crate) backoff: Option<Key<f64>>,
    pub(crate) jitter: Option<Key<f64>>,
    pub(crate) half_open_calls: Option<Key<u32>>,
    pub(crate) successes: Option<Key<u32>>,
    pub(crate) probe_timeout: Option<Key<u64>>,
    pub(crate) max_concurrent: Option<Key<u32>>,
    /// `probe = path`: the health check run while the breaker is open.
    pub(crate) probe: Option<Key<ExprPath>>,
    pub(crate) probe_every: Option<Key<u64>>,
    pub(crate) max_keys: Option<Key<u32>>,
    pub(crate) idle_for: Option<Key<u64>>,
    pub(crate) latency: Option<Key<bool>>,
    pub(crate) health: Option<Key<bool>>,
    pub(crate) critical: Option<Key<bool>>,
    pub(crate) timeout: Option<Key<u64>>,
    /// From `fallback = path` or `fallback_with_reason = path`.
    pub(crate) fallback: Option<Key<ExprPath>>,
    /// The fallback came from `fallback_with_reason`: it takes a `FallbackReason` last.
    pub(crate) fallback_with_reason: bool,
    pub(crate) fallback_on: Option<Key<FallbackOn>>,
    pub(crate) classify: Option<Key<ExprPath>>,
    /// `replay = "memory" | "disk" | "fleet"`: calls rejected while open are journaled and
    /// replayed.
    pub(crate) replay: Option<Key<Journal>>,
    /// `replay_key = expr`: the journal entry's key, an expression over the arguments.
    pub(crate) replay_key: Option<Key<Expr>>,
    pub(crate) replay_max: Option<Key<u32>>,
    pub(crate) replay_ttl: Option<Key<u64>>,
    pub(crate) replay_rate: Option<Key<u32>>,
    pub(crate) replay_attempts: Option<Key<u32>>,
    /// `replay_claim_after = "30s"` (nanoseconds): with `replay = "fleet"`, when an entry a
    /// dead instance held is taken over.
    pub(crate) replay_claim_after: Option<Key<u64>>,
    pub(crate) krate: Option<Key<Path>>,
}

/// Collects errors so that all of them are reported at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// No error was reported.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

impl From<syn::Error> for Errors {
    fn from(error: syn::Error) -> Self {
        let mut errors = Errors::default();
        errors.push(error);
        errors
    }
}
