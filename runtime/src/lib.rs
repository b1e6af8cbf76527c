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
#[doc(hidden)]
pub mod keys;
#[cfg(feature = "serde")]
mod load;
mod metrics;
mod outcome;
mod registry;
#[cfg(feature = "serde")]
mod serde_impl;
mod suggest;
mod sync;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

pub use breaker::{Breaker, OwnedPermit, Permit, SharedState, State};
#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, ConfigBuilder, ConfigError, Window};
pub use error::{Error, RejectReason, Rejected, Timeout};
pub use event::{Event, Reason};
#[cfg(feature = "serde")]
pub use load::LoadError;
pub use metrics::Metrics;
pub use outcome::Outcome;
pub use registry::{Registry, registry};
