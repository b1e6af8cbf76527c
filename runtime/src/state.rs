//! Where a breaker stands: [`State`], its plain-data form [`SharedState`], and the packed
//! words the breaker's protocols run on ([`Word`], [`Streak`], [`Round`], [`Places`]), each
//! laid out in one place below (see "The protocol" in `breaker.rs`).

use core::fmt;
use core::time::Duration;

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Calls run and their outcomes are counted.
    Closed,
    /// Calls are rejected until `open_for` has passed.
    Open,
    /// A limited number of probe calls decide between closing and opening again.
    HalfOpen,
    /// Forced open by hand: every call is rejected until [`Breaker::reset`](crate::Breaker::reset).
    ForcedOpen,
    /// Switched off by hand: every call runs, and its outcome is counted in the
    /// [`metrics`](crate::Breaker::metrics) totals but judged by no policy, until
    /// [`Breaker::reset`](crate::Breaker::reset).
    Disabled,
}

impl State {
    pub(crate) const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];

    /// The state's name: `closed`, `open`, `half-open`, `forced-open`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced-open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// The packed words. Each is one `u64` in an atomic (`sync::Atomic`), with the generation it
// belongs to in its high 32 bits, so that one compare-and-swap both checks the generation and
// changes the rest ("The protocol" in `breaker.rs` says what each is for). Their layouts:
//
//   Word    (`Inner::state`)   generation:32 | 0:24 | state tag:8 (`State as u8`)
//   Streak  (`Inner::streak`)  generation:32 | failures in a row:32
//           under `failures_within`:
//                              generation:32 | streak tag:8 | failures in a row:24 (saturating)
//   Round   (`Inner::probe`)   generation:32 | probes admitted:16 | probe successes:16
//   Places  (`Inner::active`)  generation:32 | bulkhead places taken:32
//   Gate    (`window.rs`)      generation:32 | failure records inside the window:32
//   Bucket  (`window.rs`)      time bucket's epoch:32 | count in that bucket:32 (saturating)
//   Ticket  (`permit.rs`)      generation:32 | 0:24 | permit kind:8 (a closed one is 0, as is
//                              `State::Closed`: a closed state word is a closed ticket)
//
// The accessors are `#[inline(always)]`: the words cost what the shifts and masks they replace
// did (PERF(`closed_ok/bb_call`), the state word and the streak are on the closed call path).

/// `generation` in a word's high 32 bits, `low` below.
#[inline(always)]
pub(crate) const fn stamp(generation: u32, low: u64) -> u64 {
    ((generation as u64) << 32) | low
}

/// The generation in a word's high 32 bits.
#[inline(always)]
pub(crate) const fn generation_of(bits: u64) -> u32 {
    (bits >> 32) as u32
}

/// The low 32 bits of a word: the count under its generation.
#[inline(always)]
pub(crate) const fn low_of(bits: u64) -> u32 {
    bits as u32
}

/// Defines a packed word: a `#[repr(transparent)]` `u64` with `generation()`, stored in a
/// `sync::Atomic`.
macro_rules! packed_word {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(transparent)]
        pub(crate) struct $name(u64);

        impl $name {
            /// The generation this word belongs to.
            #[inline(always)]
            pub(crate) const fn generation(self) -> u32 {
                $crate::state::generation_of(self.0)
            }
        }

        impl crate::sync::Packed for $name {
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                $name(bits)
            }

            #[inline(always)]
            fn bits(self) -> u64 {
                self.0
            }
        }
    };
}
pub(crate) use packed_word;

packed_word!(
    /// The state word: the generation and the state. Every call reads it once (Acquire); every
    /// transition stores the next one (Release), with the generation bumped.
    Word
);

impl Word {
    /// `state` in `generation`.
    #[inline(always)]
    pub(crate) const fn new(generation: u32, state: State) -> Word {
        Word(stamp(generation, state as u64))
    }

    /// The state.
    #[inline(always)]
    pub(crate) const fn state(self) -> State {
        match self.0 & 0xff {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::Disabled,
        }
    }

    /// The word as a permit's ticket tag: generation and kind (see `Ticket::closed`).
    #[inline(always)]
    pub(crate) const fn bits(self) -> u64 {
        self.0
    }
}

packed_word!(
    /// The streak word: failures in a row in the closed state of a generation. A success only
    /// reads it, and writes only to break a streak; a failure bumps it with a compare-and-swap
    /// that fails for a stale generation.
    ///
    /// Under `failures_within` the count has 24 bits (it saturates at [`Streak::MAX_WITHIN`])
    /// and the 8 above it tag the streak, so that ending an expired streak fails against one
    /// started again meanwhile (see `Inner::record_within_failure`).
    Streak
);

impl Streak {
    const WITHIN_TAG: u32 = 24;
    const WITHIN_COUNT: u64 = (1 << Self::WITHIN_TAG) - 1;
    /// The most failures in a row counted under `failures_within`.
    pub(crate) const MAX_WITHIN: u32 = Self::WITHIN_COUNT as u32;

    /// No streak, in `generation`.
    #[inline(always)]
    pub(crate) const fn new(generation: u32) -> Streak {
        Streak(stamp(generation, 0))
    }

    /// Whether a streak is under way: any failure counted (either layout).
    #[inline(always)]
    pub(crate) const fn is_empty(self) -> bool {
        low_of(self.0) == 0
    }

    /// Failures in a row (the plain layout).
    #[inline(always)]
    pub(crate) const fn failures(self) -> u32 {
        low_of(self.0)
    }

    /// This streak with `n` failures in a row (the plain layout).
    #[inline(always)]
    pub(crate) const fn with_failures(self, n: u32) -> Streak {
        Streak(stamp(self.generation(), n as u64))
    }

    /// Failures in a row under `failures_within`.
    #[inline(always)]
    pub(crate) const fn within_failures(self) -> u32 {
        (self.0 & Self::WITHIN_COUNT) as u32
    }

    /// A `failures_within` streak of one failure in `generation`, tagged with the low 8 bits
    /// of `number` (the streak's number).
    #[inline(always)]
    pub(crate) const fn within_started(generation: u32, number: u32) -> Streak {
        let tag = (number & 0xff) as u64;
        Streak(stamp(generation, (tag << Self::WITHIN_TAG) | 1))
    }

    /// This `failures_within` streak with one more failure, saturating at
    /// [`MAX_WITHIN`](Streak::MAX_WITHIN).
    #[inline(always)]
    pub(crate) const fn within_bumped(self) -> Streak {
        if self.0 & Self::WITHIN_COUNT == Self::WITHIN_COUNT {
            self
        } else {
            Streak(self.0 + 1)
        }
    }
}

packed_word!(
    /// The probe round: probes admitted and probe successes in the half-open state of a
    /// generation. Admission is a compare-and-swap that never exceeds `half_open_calls`
    /// (at most 65 535, so each count fits its 16 bits).
    Round
);

impl Round {
    const BITS: u32 = 16;
    const MASK: u64 = (1 << Self::BITS) - 1;

    /// A round with nothing admitted, in `generation`.
    #[inline(always)]
    pub(crate) const fn new(generation: u32) -> Round {
        Round(stamp(generation, 0))
    }

    /// Probes admitted and not given back.
    #[inline(always)]
    pub(crate) const fn admitted(self) -> u32 {
        ((self.0 >> Self::BITS) & Self::MASK) as u32
    }

    /// Probes that succeeded.
    #[inline(always)]
    pub(crate) const fn successes(self) -> u32 {
        (self.0 & Self::MASK) as u32
    }

    /// One more probe admitted.
    #[inline(always)]
    pub(crate) const fn admit(self) -> Round {
        Round(self.0 + (1 << Self::BITS))
    }

    /// One admitted probe given back (an ignored one).
    #[inline(always)]
    pub(crate) const fn free(self) -> Round {
        Round(self.0 - (1 << Self::BITS))
    }

    /// One more probe succeeded.
    #[inline(always)]
    pub(crate) const fn succeed(self) -> Round {
        Round(self.0 + 1)
    }
}

packed_word!(
    /// Bulkhead places: how many are taken, and the generation they were taken in. The first
    /// admission of a generation starts the count over, so a place whose permit never records
    /// is freed by the next transition (see `Inner::acquire_other`).
    Places
);

impl Places {
    /// `taken` places in `generation`.
    #[inline(always)]
    pub(crate) const fn new(generation: u32, taken: u32) -> Places {
        Places(stamp(generation, taken as u64))
    }

    /// Places taken.
    #[inline(always)]
    pub(crate) const fn taken(self) -> u32 {
        low_of(self.0)
    }

    /// One place given back; `taken` is not 0.
    #[inline(always)]
    pub(crate) const fn released(self) -> Places {
        Places(self.0 - 1)
    }
}

/// A breaker's state as plain data: what processes sharing one breaker exchange. With the
/// `serde` feature it is stored as `{"state": "open", "open_remaining": "12.5s", "reopens": 1}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SharedState {
    /// The state.
    pub state: State,
    /// While open: how long until it probes.
    #[cfg_attr(
        feature = "serde",
        serde(default, with = "crate::serde_duration::option_as_text")
    )]
    pub open_remaining: Option<Duration>,
    /// Re-opens since the last close: 0 while closed and during the first opening, 1 during
    /// the second. Under `backoff` they set the next open time: from open or half-open, the
    /// next opening lasts `open_for × backoff^(reopens + 1)`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub reopens: u32,
}

impl SharedState {
    /// A shared state.
    pub fn new(state: State, open_remaining: Option<Duration>, reopens: u32) -> Self {
        SharedState {
            state,
            open_remaining,
            reopens,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Each word's fields read back what was written, and never spill into the generation.
    #[test]
    fn packed_fields_stay_in_their_bits() {
        let g = u32::MAX;
        for state in State::ALL {
            assert_eq!(Word::new(g, state).state(), state);
            assert_eq!(Word::new(g, state).generation(), g);
        }
        let streak = Streak::new(g).with_failures(u32::MAX);
        assert_eq!((streak.generation(), streak.failures()), (g, u32::MAX));
        let mut within = Streak::within_started(g, 0x1ff);
        assert_eq!(within.within_failures(), 1);
        for _ in 0..Streak::MAX_WITHIN {
            within = within.within_bumped();
        }
        assert_eq!(within.within_failures(), Streak::MAX_WITHIN, "saturates");
        assert_eq!(within.generation(), g);
        let round = Round::new(g).admit().admit().succeed().free();
        assert_eq!((round.admitted(), round.successes()), (1, 1));
        assert_eq!(round.generation(), g);
        let places = Places::new(g, u32::MAX).released();
        assert_eq!((places.generation(), places.taken()), (g, u32::MAX - 1));
    }
}
