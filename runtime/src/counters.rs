//! Exact call counters that cost no atomic read-modify-write on the hot path.
//!
//! A `lock xadd` costs ~7 ns on the machines we measure on, more than the whole budget of a
//! closed-state call, and a shared counter line bounces between cores. So each thread claims a
//! stripe (a cache line) once, and from then on is its only writer: it adds with a plain load
//! and store. Readers sum the stripes. A thread that finds its stripes taken by others falls
//! back to shared counters with `fetch_add`: slower, never wrong.
//!
//! # Seats: stripes outlive their threads, claims do not
//!
//! Threads come and go (pools grow and shrink, `spawn_blocking`), so a stripe must not stay
//! its first thread's for good, or every later thread takes the shared path. Nor can a thread
//! keep a list of the stripes it claimed and free them when it exits: the breakers may be
//! gone by then. So a claim names the thread in a way that dies with it, and nothing points
//! from the thread to the breakers:
//!
//! - A thread takes a **seat** when it first counts: an index into a process-wide table
//!   (the smallest free one, so live threads keep the low indices) and the seat's
//!   **incarnation**, the number of threads that sat there before. Its *token*, `incarnation
//!   << 16 | index + 1`, is what it writes in a stripe's owner word when it claims it, and
//!   what the hot path compares the owner word with: a thread-local load and a compare, as
//!   before seats.
//! - When the thread exits, a thread-local guard stores "no seat" in the thread's token cell
//!   (a record made by a later thread-local destructor takes the shared path), bumps the
//!   seat's incarnation with Release, and frees the seat. Every claim made with the token is
//!   dead from then on: no live thread holds that token, the seat's next thread included.
//! - A thread whose stripe's owner word holds another token reads that seat's incarnation
//!   with Acquire. If it moved on, the owner is gone, and the thread takes the stripe over with
//!   a compare-and-swap from the dead token (two claimants: one wins). The Acquire pairs with
//!   the exit's Release, so the new owner's plain loads see every count the old one stored:
//!   the counts stay in the stripe and nothing is lost or folded anywhere.
//! - A stripe has at most one writer at a time: only the thread whose token is in its owner
//!   word, and that word changes only from a dead token (or 0) to a live one. A thread's slot
//!   therefore never changes while it lives, which the time window's per-thread call words
//!   rely on: they change hands with the stripe, under the same Acquire.
//!
//! Incarnations are 48 bits: a token repeats only after 2^48 exits from one seat. A thread
//! that finds every seat taken (more than `SEATS` live threads have counted) gets none and
//! counts on the shared path for the rest of its life. The same protocol runs under loom, with
//! a few seats and loom's thread-locals, in `tests/loom/windows.rs` and the models below.

use core::cell::Cell;
use core::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sync::{AtomicU64, LazyBox, Ordering};

/// What is counted.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum Count {
    Success = 0,
    Failure = 1,
    Ignored = 2,
    Rejected = 3,
    Slow = 4,
}
const KINDS: usize = 5;
/// Extra stripes, allocated when a second thread first records on a breaker.
pub(crate) const MORE: usize = 4;

/// Where a thread's counts went: `0` for the first stripe, `1..=MORE` for a spill stripe,
/// [`SHARED`] for the shared fallback. A thread's slot never changes while it lives once it
/// has one of its own, and no other live thread has it, so other per-thread structures (the
/// time window's call counts) can be indexed by it and written by their one writer without
/// atomics. When the thread exits, the slot passes to the next thread that claims it.
pub(crate) type Slot = usize;
/// The slot of a thread with no stripe of its own.
pub(crate) const SHARED: Slot = MORE + 1;

/// The first thread's counts. The breaker puts them at the start of a cache line that other
/// threads touch only on state transitions. Their owner token lives elsewhere (on the
/// breaker's read-mostly first line): other threads check it on every call, and reading it
/// from the line the owner writes on every call would pull that line back and forth between
/// cores.
#[derive(Default)]
pub(crate) struct Counts([AtomicU64; KINDS]);

/// A later thread's counts with their owner: only that thread reads and writes the line.
#[repr(align(64))]
#[derive(Default)]
struct Stripe {
    /// The token of the thread that writes this stripe (0: none yet). Changes only from 0 or a
    /// dead token; see the module doc.
    owner: AtomicU64,
    n: [AtomicU64; KINDS],
}

/// The stripes of the threads after the first, allocated when the second thread arrives.
/// Kept apart from the first stripe so that reading it never touches the first thread's line.
#[derive(Default)]
pub(crate) struct Spill(LazyBox<More>);

/// What a breaker used by more than one thread needs; allocated when the second one arrives.
#[derive(Default)]
struct More {
    stripes: [Stripe; MORE],
    shared: [AtomicU64; KINDS],
}

/// The low bits of a token: its seat's index + 1 (never 0, never all ones).
const SEAT_BITS: u32 = 16;
const SEAT_MASK: u64 = (1 << SEAT_BITS) - 1;
/// An incarnation, the high 48 bits of a token.
const INCARNATION_MASK: u64 = (1 << (64 - SEAT_BITS)) - 1;
/// How many threads can hold a seat at once.
#[cfg(not(loom))]
const SEATS: usize = 1 << 14;
#[cfg(loom)]
const SEATS: usize = 8;
/// A thread's token before it first counts: it has no stripe, and the slow path seats it.
const UNASSIGNED: u64 = u64::MAX;
/// The token of a thread with no seat (exited, or every seat taken): it claims nothing.
const NONE: u64 = u64::MAX - 1;

// A spill stripe is picked by `token % MORE`: that must depend on the seat alone.
const _: () = assert!((1u64 << SEAT_BITS).is_multiple_of(MORE as u64));
const _: () = assert!((SEATS as u64) < SEAT_MASK - 1);

/// The process-wide seat table.
struct Seats {
    /// Each seat's incarnation: how many threads have left it.
    incarnation: [AtomicU64; SEATS],
    /// A std mutex even under loom: it only hands out indices (a seat's hand-over is ordered
    /// by its incarnation, see `take`), holds no loom operation, and a loom mutex here
    /// multiplied the interleavings of every model in `tests/loom/breaker.rs`.
    free: std::sync::Mutex<Free>,
}

#[derive(Default)]
struct Free {
    /// Seats never taken start here.
    next: usize,
    /// Seats given back, smallest first.
    given: BinaryHeap<Reverse<usize>>,
}

#[cfg(not(loom))]
static SEATS_TABLE: Seats = Seats {
    incarnation: [const { AtomicU64::new(0) }; SEATS],
    free: std::sync::Mutex::new(Free {
        next: 0,
        given: BinaryHeap::new(),
    }),
};

/// What a thread's guard holds to give its seat back: a `'static` reference, or under loom
/// (whose statics are dropped before the model's main thread exits) a reference count, a std
/// one: its counting is not part of the protocol, and as loom operations the drops at thread
/// exit multiplied the interleavings of every model.
#[cfg(not(loom))]
type SeatsRef = &'static Seats;
#[cfg(loom)]
type SeatsRef = std::sync::Arc<Seats>;

#[cfg(loom)]
loom::lazy_static! {
    static ref SEATS_TABLE: std::sync::Arc<Seats> = std::sync::Arc::new(Seats {
        incarnation: core::array::from_fn(|_| AtomicU64::new(0)),
        free: std::sync::Mutex::new(Free::default()),
    });
}

#[inline]
fn seats() -> &'static Seats {
    &SEATS_TABLE
}

fn seats_ref() -> SeatsRef {
    #[cfg(not(loom))]
    {
        &SEATS_TABLE
    }
    #[cfg(loom)]
    {
        SEATS_TABLE.clone()
    }
}

impl Seats {
    /// A free seat's token, or [`NONE`] if every seat is taken.
    fn take(&self) -> u64 {
        let seat = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            match free.given.pop() {
                Some(Reverse(seat)) => seat,
                None if free.next < SEATS => {
                    free.next += 1;
                    free.next - 1
                }
                None => return NONE,
            }
        };
        // A read-modify-write reads the latest incarnation, whatever orders the free list: a
        // seat's next thread never gets the token of the one before. Acquire: its claims take
        // over from that thread's counts (as in `alive`).
        let incarnation = self.incarnation[seat].fetch_add(0, Ordering::Acquire) & INCARNATION_MASK;
        incarnation << SEAT_BITS | (seat as u64 + 1)
    }

    /// Gives the seat of a thread that is exiting back: its claims die here.
    fn give_back(&self, token: u64) {
        let seat = seat_of(token);
        // Release: every count the thread stored happens before the Acquire of whoever finds
        // its claims dead and takes them over (`alive`).
        self.incarnation[seat].fetch_add(1, Ordering::Release);
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .given
            .push(Reverse(seat));
    }

    /// Whether the thread that claimed with `token` is still running.
    #[inline]
    fn alive(&self, token: u64) -> bool {
        // Acquire: see `give_back`.
        self.incarnation[seat_of(token)].load(Ordering::Acquire) & INCARNATION_MASK
            == token >> SEAT_BITS
    }
}

fn seat_of(token: u64) -> usize {
    (token & SEAT_MASK) as usize - 1
}

/// A thread's seat, given back when its thread-locals are destroyed.
struct Seat {
    token: Cell<u64>,
    held: Cell<Option<SeatsRef>>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some(seats) = self.held.take() {
            // From here on this thread counts on the shared path (a record made by a later
            // thread-local destructor), before anyone may take its stripes over.
            let _ = ID.try_with(|id| id.set(NONE));
            seats.give_back(self.token.get());
        }
    }
}

// This thread's token (`UNASSIGNED` before it first counts), and the guard of its seat. Two
// thread-locals: the token is read on every call, and one without a destructor is a plain
// thread-local load, with no check of whether it is still alive.
#[cfg(not(loom))]
std::thread_local! {
    static ID: Cell<u64> = const { Cell::new(UNASSIGNED) };
    static SEAT: Seat = const {
        Seat {
            token: Cell::new(NONE),
            held: Cell::new(None),
        }
    };
}
#[cfg(loom)]
loom::thread_local! {
    static ID: Cell<u64> = Cell::new(UNASSIGNED);
    static SEAT: Seat = Seat {
        token: Cell::new(NONE),
        held: Cell::new(None),
    };
}

/// This thread's token as it stands, without seating it: a thread-local load.
#[inline(always)]
fn current_id() -> u64 {
    #[cfg(not(loom))]
    {
        ID.with(Cell::get)
    }
    #[cfg(loom)]
    {
        ID.try_with(Cell::get).unwrap_or(NONE)
    }
}

/// This thread's seat, if it has one: an index below `SEATS` that no other live thread holds,
/// handed to the seat's next thread after this one's exit with Release and Acquire (see the
/// module doc). A thread-local load; a thread is seated by its first count.
#[inline(always)]
pub(crate) fn current_seat() -> Option<usize> {
    match current_id() {
        UNASSIGNED | NONE => None,
        token => Some(seat_of(token)),
    }
}

/// Seats this thread now, as its first count would, and returns its seat: for tests whose
/// threads must be seated before they touch what stripes by seat.
#[cfg(all(test, not(loom)))]
pub(crate) fn seat_now() -> Option<usize> {
    thread_id();
    current_seat()
}

/// This thread's token, seating it on first use: a live token, or [`NONE`].
fn thread_id() -> u64 {
    match current_id() {
        UNASSIGNED => seat_me(),
        id => id,
    }
}

#[cold]
fn seat_me() -> u64 {
    // The guard first: a thread whose thread-locals are being destroyed gets no seat.
    let token = SEAT
        .try_with(|seat| {
            let token = seats().take();
            if token != NONE {
                seat.token.set(token);
                seat.held.set(Some(seats_ref()));
            }
            token
        })
        .unwrap_or(NONE);
    let _ = ID.try_with(|id| id.set(token));
    token
}

/// Adds one to a count only this thread writes.
#[inline(always)]
fn bump(c: &AtomicU64) {
    // Single writer: a load and a store cannot lose an increment, and a 64-bit store is never
    // torn for readers.
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Adds one to `counts[kind]` if this thread owns them, or can claim them: free, or their
/// owner has exited.
#[inline]
fn try_add(owner: &AtomicU64, counts: &[AtomicU64; KINDS], me: u64, kind: Count) -> bool {
    // Relaxed: the owner token only decides who writes. A takeover is ordered after the old
    // owner's counts by `Seats::alive`'s Acquire.
    let who = owner.load(Ordering::Relaxed);
    if who == me
        || (me != NONE
            && (who == 0 || !seats().alive(who))
            && owner
                .compare_exchange(who, me, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok())
    {
        bump(&counts[kind as usize]);
        true
    } else {
        false
    }
}

impl Counts {
    /// Counts one `kind`: here if this thread is `owner` (or claims it now), else in `spill`.
    ///
    /// A thread that owns a stripe, here or in the spill, counts inline: a thread-local load,
    /// an owner compare and a plain increment (a second thread's stripe is one pointer
    /// further). Seating a thread, claiming a stripe and the shared fallback are a call, so
    /// that what is inlined into every call site stays small.
    ///
    /// Returns this thread's [`Slot`].
    #[inline(always)]
    pub(crate) fn add(&self, owner: &AtomicU64, spill: &Spill, kind: Count) -> Slot {
        let me = current_id();
        // Relaxed: the owner token only decides who writes; the counts carry no other data.
        if owner.load(Ordering::Relaxed) == me {
            bump(&self.0[kind as usize]);
            return 0;
        }
        if let Some(more) = spill.0.get() {
            let i = (me as usize) % MORE;
            let stripe = &more.stripes[i];
            if stripe.owner.load(Ordering::Relaxed) == me {
                bump(&stripe.n[kind as usize]);
                return 1 + i;
            }
        }
        self.add_other(owner, spill, kind)
    }

    /// `add` for a thread that does not own these counts yet, or never will.
    #[inline(never)]
    fn add_other(&self, owner: &AtomicU64, spill: &Spill, kind: Count) -> Slot {
        let me = thread_id();
        if try_add(owner, &self.0, me, kind) {
            0
        } else {
            spill.add(me, kind)
        }
    }

    /// The total of `kind` over these counts and `spill`.
    pub(crate) fn total(&self, spill: &Spill, kind: Count) -> u64 {
        let k = kind as usize;
        let mut sum = self.0[k].load(Ordering::Relaxed);
        if let Some(more) = spill.0.get() {
            sum += more.shared[k].load(Ordering::Relaxed);
            sum += more
                .stripes
                .iter()
                .map(|s| s.n[k].load(Ordering::Relaxed))
                .sum::<u64>();
        }
        sum
    }
}

impl Spill {
    #[inline]
    fn add(&self, me: u64, kind: Count) -> Slot {
        let more = self.0.get_or_default();
        let i = (me as usize) % MORE;
        let stripe = &more.stripes[i];
        if try_add(&stripe.owner, &stripe.n, me, kind) {
            1 + i
        } else {
            more.shared[kind as usize].fetch_add(1, Ordering::Relaxed);
            SHARED
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

/// The stripe protocol under loom, with the slots in view (`tests/loom/windows.rs` models it
/// through a breaker).
#[cfg(all(test, loom))]
mod loom_tests;
