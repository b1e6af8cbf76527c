//! The circuit-breaker runtime behind [breakerbox](https://docs.rs/breakerbox): the state
//! machine and its policies, the registry, errors, events, metrics and clock.
//!
//! Use it through the `breakerbox` crate, which re-exports everything here.
//!
//! ```
//! use breakerbox_runtime::{Breaker, Config, Error, State};
//! use std::time::Duration;
//!
//! let breaker = Breaker::new("users", Config::builder().failures(5).open_for(Duration::from_secs(2)).build()?);
//! let answer: Result<u32, Error<std::io::Error>> = breaker.call(|| Ok(42));
//! assert_eq!(answer.unwrap(), 42);
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), breakerbox_runtime::ConfigError>(())
//! ```
#![warn(missing_docs)]

mod breaker;
mod clock;
mod config;
mod counters;
mod duration;
mod error;
mod event;
#[cfg(feature = "metrics")]
pub mod export;
#[cfg(feature = "http")]
pub mod http;
mod keyed;
#[doc(hidden)]
pub mod keys;
#[cfg(feature = "serde")]
mod load;
mod metrics;
mod outcome;
mod registration;
mod registry;
#[cfg(feature = "serde")]
mod serde_impl;
mod suggest;
mod sync;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

#[doc(hidden)]
pub use breaker::live_breakers;
pub use breaker::{Breaker, OwnedPermit, Permit, SharedState, State, WeakBreaker};
#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, ConfigBuilder, ConfigError, Window};
pub use error::{Error, RejectReason, Rejected, Timeout};
pub use event::{Event, Reason};
pub use keyed::{BreakerMap, Evicted, FamilyMetrics, KeyMetrics, KeyTypeMismatch};
#[cfg(feature = "serde")]
pub use load::LoadError;
pub use metrics::Metrics;
pub use outcome::Outcome;
pub use registration::{ConfigConflict, Conflict, Conflicts, Site};
pub use registry::{Registry, registry};

/// Support for the code `#[circuit_breaker]` generates, re-exported by the facade's
/// `__private`. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::__breakerbox_register as register;
    pub use crate::registration::Registration;
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_os = "fuchsia",
        target_os = "macos",
        target_os = "ios",
        target_os = "tvos",
        target_os = "windows",
        target_os = "illumos",
        target_os = "freebsd",
        target_os = "openbsd",
    ))]
    pub use {crate::registration::REGISTRATIONS, linkme};
}
