//! The tower layer (`breakerbox-tower`, `breakerbox::tower`): admission, classification,
//! sharing, readiness, cancellation, panics, and no allocation per request. Time comes from a
//! `ManualClock`; nothing sleeps.

mod alloc;
mod layer;
mod panics;
