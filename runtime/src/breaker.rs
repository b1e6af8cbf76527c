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
//! One file per type:
//!
//! - `handle`: [`Breaker`] and every one of its methods, the other handles ([`WeakBreaker`],
//!   [`OwnedPermit`]), how a breaker is made and how long it lives, and `call_async`'s future;
//! - `inner`: the shared state (`Inner`), its cache-line layout, and the parts few breakers
//!   use (`Extras`), made on first use;
//! - `admit` (admission), `record` (recording) and `transition` (the state machine, and
//!   telling listeners): `Inner`'s protocols, the call path first;
//! - `permit`: [`Permit`], the `Ticket` it carries, `Guarded` (an awaited call's permit) and
//!   `Lease` (the tower layer's);
//! - `rejected`: [`Rejected`], what it reports of its breaker, [`Error`], and a failure's
//!   message;
//! - `open_timer`: an opening's timer, armed and fired; `probing`: health probes run while
//!   open.
//!
//! The vocabulary they share sits in `state`, `identity`, `error` and `event`; nothing here
//! names the registry.
//!
//! # Comments that speed depends on
//!
//! A comment that starts `PERF(case)` explains a layout or inlining choice that the bench case
//! `case` of `benches/compare.rs` measures (`cargo bench -p breakerbox-benches --bench compare
//! -- case`). Change what it guards only with that case run before and after.

mod admit;
mod handle;
mod inner;
mod open_timer;
mod permit;
mod probing;
mod record;
mod rejected;
#[cfg(all(test, not(loom)))]
mod tests;
mod transition;

pub use handle::{Breaker, OwnedPermit, WeakBreaker};
pub use permit::{Guarded, Lease, Permit};
pub use rejected::{Error, Rejected};
pub(crate) use rejected::{displayed, message};
