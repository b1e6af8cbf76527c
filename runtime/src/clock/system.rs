//! [`SystemClock`]: the operating system's monotonic clock, read without a virtual call.

use core::time::Duration;

use super::source::Clock;
#[cfg(not(target_os = "linux"))]
use super::source::nanos;

/// The operating system's monotonic clock.
///
/// On Linux `now_coarse` reads `CLOCK_MONOTONIC_COARSE` (a few nanoseconds, millisecond
/// resolution) and `now` reads `CLOCK_MONOTONIC`; elsewhere both use [`std::time::Instant`].
///
/// A breaker on this clock times its calls (for a `slow` threshold or its latency histogram)
/// with the CPU's time-stamp counter instead, where the `quanta` crate finds one it can trust
/// (an invariant TSC on x86-64, the system counter on aarch64), and with `CLOCK_MONOTONIC`
/// elsewhere: a call's duration is only ever compared with other durations and times of that
/// same timer, and two readings of the counter cost a third of two of `CLOCK_MONOTONIC` on a
/// virtual machine (BENCHMARKS.md, the slow-call rate). Calibrating it takes under a
/// millisecond here (quanta stops at 200 ms), once per process, when the first breaker that
/// times its calls is made.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

/// Nanoseconds of a Linux clock. Straight to `u64`: going through `Duration` and `as_nanos`
/// (a 128-bit multiply and a range check) costs more than the rest of a rejection.
#[cfg(target_os = "linux")]
#[inline]
fn read_clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec, and both clock ids used here exist on every
    // Linux since 2.6.32, so the call cannot fail; on failure `ts` would stay zero.
    unsafe { libc::clock_gettime(id, &mut ts) };
    // A monotonic clock's seconds fit 584 years of uptime in the product.
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

impl SystemClock {
    #[inline]
    pub(super) fn nanos(self) -> u64 {
        #[cfg(target_os = "linux")]
        return read_clock(libc::CLOCK_MONOTONIC);
        #[cfg(not(target_os = "linux"))]
        return nanos(since_origin());
    }

    /// Nanoseconds on the calls' timer (see the type's doc), since the timer's first reading.
    /// Under Miri, which cannot read the time-stamp counter (an instruction, not a system
    /// call), the monotonic clock.
    #[inline]
    pub(crate) fn timer_nanos(self) -> u64 {
        #[cfg(miri)]
        return self.nanos();
        #[cfg(not(miri))]
        {
            let (clock, origin) = timer();
            clock.delta_as_nanos(origin, clock.raw())
        }
    }

    /// Calibrates the calls' timer now, so that the first timed call does not wait for it.
    pub(crate) fn start_timer(self) {
        #[cfg(not(miri))]
        timer();
    }

    #[inline]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn coarse_nanos(self) -> u64 {
        self.nanos_coarse()
    }

    #[inline]
    pub(super) fn nanos_coarse(self) -> u64 {
        #[cfg(target_os = "linux")]
        return read_clock(libc::CLOCK_MONOTONIC_COARSE);
        #[cfg(not(target_os = "linux"))]
        return nanos(since_origin());
    }
}

/// The calls' timer and its first raw reading. `quanta::Clock::new` calibrates the counter
/// against the OS clock (a busy loop of about a millisecond here, 200 ms at most), and reads
/// the OS clock itself where the counter is missing or not invariant.
#[cfg(not(miri))]
#[inline]
fn timer() -> (&'static quanta::Clock, u64) {
    static TIMER: std::sync::OnceLock<(quanta::Clock, u64)> = std::sync::OnceLock::new();
    let (clock, origin) = TIMER.get_or_init(|| {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        (clock, origin)
    });
    (clock, *origin)
}

#[cfg(not(target_os = "linux"))]
fn since_origin() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }

    #[inline]
    fn now_coarse(&self) -> Duration {
        Duration::from_nanos(self.nanos_coarse())
    }
}
