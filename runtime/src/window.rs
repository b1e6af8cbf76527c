//! Sliding windows for failure and slow-call rates, lock-free: [`RateWindow`] (in `rate`),
//! by calls (`calls`) or by time (`time`), with the gate and tally both share (`gate`).

mod calls;
mod gate;
mod rate;
mod time;

pub(crate) use rate::RateWindow;

#[cfg(all(test, not(loom)))]
mod tests;
