//! breakerbox: placeholder, being written.
pub use breakerbox_macros::circuit_breaker;
pub use breakerbox_runtime::*;
#[doc(hidden)]
pub mod __private;
