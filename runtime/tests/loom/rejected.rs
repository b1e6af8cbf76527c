//! loom model of how a rejection, or a lease (the tower layer's permit), keeps its breaker
//! alive without a reference count (`runtime/src/breaker/orphans.rs`): the breaker's last
//! handle and its last rejections and leases are dropped on different threads, in every
//! order, and the breaker is freed exactly once, after the last of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use breakerbox_runtime::{Breaker, Config, ManualClock};
use loom::thread;

/// An open `Breaker::new` breaker whose contents' drop bumps the returned count (a guard held
/// by its listener, dropped with the breaker's contents).
fn open_breaker() -> (Breaker, Arc<AtomicUsize>) {
    let config = Config::builder()
        .failures(1)
        .clock(ManualClock::without_timers())
        .build()
        .unwrap();
    let b = Breaker::new("loom-rejected", config);
    let freed = Arc::new(AtomicUsize::new(0));
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = Guard(freed.clone());
    b.on_state_change(move |_| {
        let _ = &guard;
    });
    b.force_open();
    (b, freed)
}

/// The last handle on one thread, a rejection made before on the other: whichever is dropped
/// last frees the breaker, once.
#[test]
fn the_last_of_a_handle_and_a_moved_rejection_frees_the_breaker_once() {
    loom::model(|| {
        let (b, freed) = open_breaker();
        let r = b.try_acquire().unwrap_err();
        let t = thread::spawn(move || {
            assert_eq!(r.name(), "loom-rejected");
            drop(r);
        });
        drop(b);
        t.join().unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), 1);
    });
}

/// Each thread makes its own rejection through its own handle (so each counts it on its own
/// line) and drops them in any order against the other thread's handle and rejection.
#[test]
fn rejections_counted_on_two_threads_free_the_breaker_once_after_the_last() {
    loom::model(|| {
        let (b, freed) = open_breaker();
        let b2 = b.clone();
        let t = thread::spawn(move || {
            let r = b2.try_acquire().unwrap_err();
            drop(b2);
            assert_eq!(r.name(), "loom-rejected");
            drop(r);
        });
        let r = b.try_acquire().unwrap_err();
        drop(b);
        assert_eq!(r.name(), "loom-rejected");
        drop(r);
        t.join().unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), 1);
    });
}

/// A clone made on another thread, from a rejection whose breaker has no handle left: the
/// clone keeps it alive, and the last drop of the two frees it.
#[test]
fn a_clone_of_an_orphaned_rejection_keeps_the_breaker_until_both_are_dropped() {
    loom::model(|| {
        let (b, freed) = open_breaker();
        let r = b.try_acquire().unwrap_err();
        drop(b);
        let t = thread::spawn(move || {
            let copy = r.clone();
            let t2 = thread::spawn(move || drop(r));
            assert_eq!(copy.name(), "loom-rejected");
            drop(copy);
            t2.join().unwrap();
        });
        t.join().unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), 1);
    });
}

/// A lease (the tower layer's permit: no handle, counted as a rejection is) moved to another
/// thread and recorded there while this thread drops the last handle, a rejection of the same
/// breaker alive beside it: the last of the three frees the breaker, once.
#[test]
fn a_lease_recorded_on_another_thread_frees_the_breaker_once_after_the_last() {
    loom::model(|| {
        let (b, freed) = open_breaker();
        b.reset();
        let lease = breakerbox_runtime::__integrations::lease(&b).unwrap();
        b.force_open();
        let r = b.try_acquire().unwrap_err();
        let t = thread::spawn(move || {
            lease.record(breakerbox_runtime::Outcome::Success);
        });
        drop(b);
        drop(r);
        t.join().unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), 1);
    });
}

/// Each thread makes a lease through its own handle (counted on its own line) and ends it
/// after dropping that handle, in any order against the other thread.
#[test]
fn leases_made_on_two_threads_free_the_breaker_once_after_the_last() {
    loom::model(|| {
        let (b, freed) = open_breaker();
        b.reset();
        let b2 = b.clone();
        let t = thread::spawn(move || {
            let lease = breakerbox_runtime::__integrations::lease(&b2).unwrap();
            drop(b2);
            drop(lease);
        });
        let lease = breakerbox_runtime::__integrations::lease(&b).unwrap();
        drop(b);
        lease.record(breakerbox_runtime::Outcome::Success);
        t.join().unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), 1);
    });
}
