//! The breaker: admission, recording, and the state machine.
//!
//! # The protocol
//!
//! The words below are named types, each laid out in `state.rs` (`Word`, `Streak`, `Round`,
//! `Places`) or `window/gate.rs` (`Gate`), with the generation in their high 32 bits.
//!
//! * `state` (a `Word`) packs the generation and the state tag. Every call reads it once
//!   (Acquire). Every transition happens under `transition` (a mutex taken only on
//!   transitions, never on the call path), prepares the new state's data first, then publishes
//!   the new word with a Release store, bumping the generation.
//! * A permit remembers the generation it was admitted in. Its result is counted in the totals
//!   but not fed to the policy if the generation moved on meanwhile.
//! * Closed, consecutive policy: `streak` (a `Streak`) packs the generation and the failures in
//!   a row. A success only reads it, and writes only if there was a streak to break; a failure
//!   bumps it with a CAS that fails for a stale generation. The thread whose failure reaches
//!   the threshold trips; the transition lock and generation check make it happen once. Under
//!   `failures_within`, a streak's start is stored before the CAS that publishes the streak,
//!   which carries a tag (`Inner::record_within_failure`).
//! * Half-open: `probe` (a `Round`) packs the generation, the probes admitted, and the
//!   successes. Admission is a CAS that never exceeds `half_open_calls`.
//! * Closed, rate policies: a failure or slow call enters the window through a gate that packs
//!   the generation with the records in flight (a `Gate`; one CAS); every transition seals the
//!   gate and waits for those inside before it clears the window or publishes, so a stale
//!   failure never lands in a new window (`RateWindow::enter`).
//! * Bulkhead: admission is a CAS below `max_concurrent`, never an increment undone on refusal.
//!   The count is packed with the generation it counts for (`Places`); the first admission of a
//!   generation starts it over, and a permit of an older generation gives nothing back. So a
//!   transition frees every place, even that of a permit that never records.
//!
//! `tests/loom/breaker.rs` model-checks each of these; `tests/model/` checks the whole state
//! machine against a plain reference model.
//!
//! # Where each part is
//!
//! This file only declares the parts and re-exports what they define. They form floors: each
//! file uses (by path or by calling a method another file defines) only the files on floors
//! below it. Bottom up:
//!
//! 1. `probing` (health probes run while open) and `ticket` (what a permit carries: its
//!    generation and kind);
//! 2. `rare_parts` (the parts few breakers use, made on first use) and `rejected`
//!    ([`Rejected`], what it reports of its breaker, [`Error`]);
//! 3. `inner` (the shared state, its cache-line layout, and what it reads of itself);
//! 4. `handle` (the handles, [`Breaker`] and [`WeakBreaker`], and how a breaker is made);
//! 5. `cause` (failure messages, `explain`) and `config_change` (`reconfigure`);
//! 6. `delivery` (telling listeners) and `timer_source` (where an opening's timer is armed);
//! 7. `transition` (the state machine);
//! 8. `record` (recording) and `open_timer` (a fired or disarmed timer, a passed health probe);
//! 9. `permit` ([`Permit`], [`OwnedPermit`]);
//! 10. `admit` (admission) and `guarded` (an awaited call's permit);
//! 11. `api` (the handle's methods), `lease` (the tower layer's permit, which keeps its
//!     breaker alive without being a handle), and this file;
//! 12. `call_future` (`call_async` and its future).
//!
//! The vocabulary they share sits one floor down, in `state`, `identity`, `error` and `event`;
//! none of those, and nothing here, names the registry.
//!
//! # Comments that speed depends on
//!
//! A comment that starts `PERF(case)` explains a layout or inlining choice that the bench case
//! `case` of `benches/compare.rs` measures (`cargo bench -p breakerbox-benches --bench compare
//! -- case`). Change what it guards only with that case run before and after.

mod admit;
mod api;
mod call_future;
mod cause;
mod config_change;
mod delivery;
mod guarded;
mod handle;
mod inner;
mod lease;
mod open_timer;
mod permit;
mod probing;
mod rare_parts;
mod record;
mod rejected;
#[cfg(all(test, not(loom)))]
mod tests;
mod ticket;
mod timer_source;
mod transition;

pub(crate) use cause::displayed;
pub use guarded::Guarded;
pub use handle::{Breaker, WeakBreaker};
pub use lease::Lease;
pub use permit::{OwnedPermit, Permit};
pub use rejected::{Error, Rejected};
