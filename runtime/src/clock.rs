//! Where a breaker's time comes from: the [`Clock`] trait (in `source`), the clocks users
//! pick (`system`, `manual`, `tokio_clock`), the [`ClockRef`] a breaker holds (`clock_ref`),
//! the recent system time a time window's success is dated by (`recent`), and the system
//! clock's timer thread (`timer_thread`).

mod clock_ref;
mod manual;
#[cfg(not(loom))]
pub(crate) mod recent;
mod source;
mod system;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(not(loom))]
pub(crate) mod timer_thread;
#[cfg(feature = "tokio")]
mod tokio_clock;

pub(crate) use clock_ref::{ClockRef, RecentUser, shared};
pub use manual::ManualClock;
pub use source::Clock;
pub(crate) use source::nanos;
pub use system::SystemClock;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;
