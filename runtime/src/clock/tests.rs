//! The clocks' unit tests.

use core::time::Duration;
use std::sync::Arc;

use super::{Clock, ClockRef, ManualClock};
use crate::{Breaker, Config, State};

/// One clock method takes a clock by value or shared: a breaker on an `Arc<ManualClock>`
/// follows the test's handle to it, and configs given one `Arc<dyn Clock>` share it (and
/// so compare equal), as configs given one clock do.
#[test]
fn a_shared_clock_is_a_clock() {
    let manual = Arc::new(ManualClock::new());
    let config = Config::builder().failures(1).clock(manual.clone()).build();
    let breaker = Breaker::new("arc-clock", config.unwrap());
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    manual.advance(Duration::from_secs(60));
    breaker.call(|| Ok::<(), &str>(())).unwrap();
    assert_eq!(
        breaker.state(),
        State::Closed,
        "probed after the shared clock moved"
    );

    let shared: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let a = Config::builder().clock(shared.clone()).build().unwrap();
    let b = Config::builder().clock(shared.clone()).build().unwrap();
    assert_eq!(a, b, "one shared clock");
    let ClockRef::Custom(inner) = &a.clock else {
        panic!("a custom clock")
    };
    assert!(
        Arc::ptr_eq(inner, &shared),
        "kept as it is, not boxed again"
    );
    let c = Config::builder()
        .clock(Arc::clone(&manual))
        .build()
        .unwrap();
    assert_ne!(a, c, "another clock");
}
