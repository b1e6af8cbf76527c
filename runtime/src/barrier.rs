//! Asymmetric barriers: [`light`] on a protocol's frequent side and [`heavy`] on its rare
//! side order memory as a `SeqCst` fence on each side would (the store-buffer pattern: of two
//! threads that each store, barrier, then load the other's word, at least one sees the other's
//! store).
//!
//! On Linux, once [`init`] has registered the process for `membarrier(2)`'s private expedited
//! command, `light` is only a compiler fence and `heavy` is that system call: every thread of
//! the process running at the time executes a full barrier before it returns, and one not
//! running passed through the kernel's own barrier when it was switched out. So the frequent
//! side pays nothing at run time (a `SeqCst` fence is a locked instruction, about 5 ns on the
//! AMD machines of BENCHMARKS.md) and the rare side a few microseconds. Elsewhere, where the
//! registration fails (a kernel before 4.14, a seccomp filter), under loom and under Miri both
//! are `SeqCst` fences, the pattern `tests/loom/rejected.rs` models.

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod imp {
    use core::sync::atomic::{AtomicBool, Ordering, compiler_fence, fence};
    use std::sync::OnceLock;

    const QUERY: libc::c_int = 0;
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// Set once the registration succeeded; never cleared.
    static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
    static REGISTERED: OnceLock<bool> = OnceLock::new();

    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags = 0, cpu_id = 0)` reads no memory of ours.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_int,
                0 as libc::c_int,
            )
        }
    }

    /// Whether the kernel offers the private expedited command and its registration.
    pub(super) fn offered() -> bool {
        let supported = membarrier(QUERY);
        let needed = libc::c_long::from(PRIVATE_EXPEDITED | REGISTER_PRIVATE_EXPEDITED);
        supported >= 0 && supported & needed == needed
    }

    fn register() -> bool {
        let ok = offered() && membarrier(REGISTER_PRIVATE_EXPEDITED) == 0;
        if ok {
            ASYMMETRIC.store(true, Ordering::Relaxed);
        }
        ok
    }

    #[inline]
    pub(crate) fn init() {
        REGISTERED.get_or_init(register);
    }

    #[inline(always)]
    pub(crate) fn light() {
        // Relaxed: `true` is stored only after the registration, and `heavy` learns the same
        // mode from `REGISTERED` (a thread that sees `false` here fences, which is never wrong).
        if ASYMMETRIC.load(Ordering::Relaxed) {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    #[cold]
    pub(crate) fn heavy() {
        if *REGISTERED.get_or_init(register) {
            // The registration succeeded, and the system call takes no input that could be
            // wrong: a failure is the kernel breaking its contract, which no fence here could
            // make up for (a light side may have skipped its fence already).
            if membarrier(PRIVATE_EXPEDITED) != 0 {
                std::process::abort();
            }
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// Whether `light` is a compiler fence only in this process.
    #[cfg(test)]
    pub(crate) fn asymmetric() -> bool {
        init();
        ASYMMETRIC.load(Ordering::Relaxed)
    }
}

#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
mod imp {
    use crate::sync::{Ordering, fence};

    #[inline]
    pub(crate) fn init() {}

    #[inline(always)]
    pub(crate) fn light() {
        fence(Ordering::SeqCst);
    }

    pub(crate) fn heavy() {
        fence(Ordering::SeqCst);
    }

    #[cfg(test)]
    pub(crate) fn asymmetric() -> bool {
        false
    }
}

/// Registers the process for the asymmetric mode where it exists; until then (and where it
/// does not) [`light`] is a `SeqCst` fence. Called when a breaker whose protocols use the pair
/// is made, so that the registration's system calls happen once, off every call's path.
pub(crate) use imp::init;

/// The frequent side's barrier: a compiler fence in the asymmetric mode, else a `SeqCst`
/// fence.
pub(crate) use imp::light;

/// The rare side's barrier: `membarrier(2)` in the asymmetric mode, else a `SeqCst` fence.
pub(crate) use imp::heavy;

/// Whether the asymmetric mode is on in this process (registering it if it was not tried).
#[cfg(test)]
pub(crate) use imp::asymmetric;

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// On Linux the process registers for `membarrier` exactly when the kernel offers the
    /// private expedited command (a kernel before 4.14 or a seccomp filter may not; then the
    /// fences stay on both sides).
    #[cfg(target_os = "linux")]
    #[test]
    fn linux_registers_the_asymmetric_mode_when_the_kernel_offers_it() {
        let asymmetric = super::asymmetric();
        assert_eq!(
            asymmetric,
            super::imp::offered(),
            "the asymmetric mode is on exactly when membarrier(2) offers it"
        );
        if !asymmetric {
            eprintln!("membarrier(2) does not offer the private expedited command here");
        }
    }

    /// The store-buffer pattern, `light` on one thread and `heavy` on the other, both
    /// spinning to the start of each round: in every round at least one of them sees the
    /// other's store. (With compiler fences on both sides, x86 lets both miss in some rounds.)
    #[test]
    fn light_and_heavy_let_one_side_see_the_other() {
        super::init();
        const ROUNDS: u64 = 20_000;
        let shared = Arc::new([const { AtomicU64::new(0) }; 3]);
        let light_side = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let [go, mine, theirs] = &*shared;
                let mut missed = Vec::new();
                for round in 1..=ROUNDS {
                    while go.load(Ordering::Acquire) != round {
                        std::hint::spin_loop();
                    }
                    mine.store(round, Ordering::Relaxed);
                    super::light();
                    if theirs.load(Ordering::Relaxed) < round {
                        missed.push(round);
                    }
                }
                missed
            })
        };
        let [go, theirs, mine] = &*shared;
        let mut missed = Vec::new();
        for round in 1..=ROUNDS {
            // The light side has finished the round before: its store of it is visible.
            while theirs.load(Ordering::Acquire) != round - 1 {
                std::hint::spin_loop();
            }
            go.store(round, Ordering::Release);
            mine.store(round, Ordering::Relaxed);
            super::heavy();
            if theirs.load(Ordering::Relaxed) < round {
                missed.push(round);
            }
        }
        let light_missed = light_side.join().expect("the light side");
        let both: Vec<_> = missed.iter().filter(|r| light_missed.contains(r)).collect();
        assert!(
            both.is_empty(),
            "rounds where neither side saw the other: {both:?}"
        );
    }
}
