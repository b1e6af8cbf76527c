//! breakerbox: placeholder, being written.
pub use breakerbox_macros::circuit_breaker;
pub use breakerbox_runtime::*;
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
