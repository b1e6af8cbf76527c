//! An independent reviewer's repros of the defects in DEFECTS.md (D02, D03, D07, D09–D15 and
//! the smaller items), written from the defect text against the public API only, plus attacks
//! on the code that fixed them: weak handles, the registry's creation outside its locks,
//! caught listener panics, panic-safe messages, bulkhead generations, `failures_within`
//! under contention and keyed families.
//!
//! ManualClock everywhere; no sleeps; counts are exact. One test binary, one module per
//! defect or topic; `support` holds what they share.

mod bulkhead;
mod display;
mod failures_within;
mod keyed;
mod listeners;
mod memory;
mod registry;
mod small;
mod support;
mod user_code;
