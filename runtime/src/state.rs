//! Where a breaker stands: [`State`], its plain-data form [`SharedState`], and the packing of
//! a generation with a state tag or count into one `u64` word (see "The protocol" in
//! `breaker.rs`).

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

    pub(crate) fn tag(self) -> u64 {
        self as u64
    }

    #[inline]
    pub(crate) fn from_word(word: u64) -> State {
        match word & 0xff {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::Disabled,
        }
    }

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

#[inline]
pub(crate) fn generation(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline]
pub(crate) fn pack(generation: u32, low: u64) -> u64 {
    (u64::from(generation) << 32) | low
}

/// A breaker's state as plain data: what processes sharing one breaker exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedState {
    /// The state.
    pub state: State,
    /// While open: how long until it probes.
    pub open_remaining: Option<Duration>,
    /// Re-opens since the last close: 0 while closed and during the first opening, 1 during
    /// the second. Under `backoff` they set the next open time: from open or half-open, the
    /// next opening lasts `open_for × backoff^(reopens + 1)`.
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
