//! What both windows share: the [`Tally`] they report and the [`Gate`] failures enter by.

use crate::state::{low_of, packed_word, stamp};

/// Calls, failures and slow calls in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub calls: u64,
    pub failures: u64,
    pub slow: u64,
}

packed_word!(
    /// The window's gate (its layout is with the others, in `state.rs`): the generation the
    /// window records for, and the failure records inside it now. A failure enters by one
    /// compare-and-swap that also checks the generation; a transition moves the gate on and
    /// waits for those inside (see `RateWindow::enter`).
    Gate
);

impl Gate {
    /// One record, as `leave` takes it off the count.
    pub(super) const ONE: u64 = 1;

    /// No record inside, in `generation`.
    #[inline(always)]
    pub(super) const fn new(generation: u32) -> Gate {
        Gate(stamp(generation, 0))
    }

    /// Records inside.
    #[inline(always)]
    pub(super) const fn inside(self) -> u32 {
        low_of(self.0)
    }

    /// One more record inside.
    #[inline(always)]
    pub(super) const fn entered(self) -> Gate {
        Gate(self.0 + Self::ONE)
    }

    /// The gate moved to `generation`, with the records inside kept.
    #[inline(always)]
    pub(super) const fn moved_to(self, generation: u32) -> Gate {
        Gate(stamp(generation, self.inside() as u64))
    }
}
