//! The [`Ticket`] a permit carries: its generation and [`Kind`] in one word, and its start
//! time.

use crate::state::{State, Word, generation_of, stamp};

/// What a permit was admitted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Closed = 0,
    Probe = 1,
    Disabled = 2,
}

/// What a permit carries: its generation and kind in one word (laid out in `state.rs`), and
/// its start time.
/// PERF(`closed_ok/bb_call`): two plain words, so that `Result<Permit, _>` moves through
/// registers. A `u32` and two one-byte fields make the compiler repack the permit through the
/// stack with mixed-width loads and stores, and the store-forwarding stall costs more than the
/// rest of a closed call.
#[derive(Clone, Copy)]
pub(super) struct Ticket {
    pub(super) tag: u64,
    /// When the call started, if a `slow` threshold needs it measured.
    pub(super) started: u64,
}

impl Ticket {
    #[inline(always)]
    pub(super) fn new(generation: u32, kind: Kind, started: u64) -> Ticket {
        Ticket {
            tag: stamp(generation, kind as u64),
            started,
        }
    }

    /// A closed permit's ticket, from the closed state word it was admitted by: the state
    /// word is the ticket, since a closed state's tag is 0, as is a closed kind's, and an
    /// untimed call's start is 0. So the plain closed admission builds its permit from the word
    /// it loaded, with no arithmetic (PERF(`closed_ok/bb_call`)).
    #[inline(always)]
    pub(super) fn closed(word: Word) -> Ticket {
        const { assert!(State::Closed as u64 == Kind::Closed as u64) };
        Ticket {
            tag: word.bits(),
            started: 0,
        }
    }

    #[inline(always)]
    pub(super) fn generation(self) -> u32 {
        generation_of(self.tag)
    }

    #[inline(always)]
    pub(super) fn kind(self) -> Kind {
        match self.tag & 0xff {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Disabled,
        }
    }
}
