//! Sliding windows for failure and slow-call rates: [`RateWindow`] (in `rate`), by calls
//! (`calls`) or by time (`time`), with the gate and tally both share (`gate`). A window by
//! time counts without a lock; one by calls counts a success without one, and takes its
//! ring's lock for a failure, a slow call and a thread's first success in a new generation.

mod calls;
mod gate;
mod rate;
mod time;

pub(crate) use rate::RateWindow;

#[cfg(all(test, not(loom)))]
mod tests;
