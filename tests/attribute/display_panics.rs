//! The attribute around user code that panics: an error whose `Display` panics when its
//! failure trips the breaker, and a body that panics while a listener panics too.

use std::fmt;
use std::panic::catch_unwind;
use std::time::Duration;

use breakerbox::{Config, ManualClock, Rejected, State, circuit_breaker, registry};

const S: Duration = Duration::from_secs(1);

/// An error whose `Display` panics.
#[derive(Debug)]
enum AppError {
    Panicky,
    Rejected(Rejected),
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Panicky => panic!("AppError's Display panics"),
            AppError::Rejected(r) => r.fmt(f),
        }
    }
}

impl From<Rejected> for AppError {
    fn from(r: Rejected) -> Self {
        AppError::Rejected(r)
    }
}

#[circuit_breaker(name = "adv-attr-display", failures = 2, open_for = "10s")]
fn display_panics() -> Result<u32, AppError> {
    Err(AppError::Panicky)
}

#[test]
fn attribute_error_display_panicking_on_the_trip() {
    let clock = ManualClock::new();
    assert!(registry().set_clock("adv-attr-display", clock.clone()));
    for _ in 0..2 {
        assert!(matches!(display_panics(), Err(AppError::Panicky)));
    }
    let b = registry().get("adv-attr-display").unwrap();
    assert_eq!(b.state(), State::Open);
    assert!(matches!(display_panics(), Err(AppError::Rejected(_))));
    clock.advance(10 * S);
    assert!(matches!(display_panics(), Err(AppError::Panicky))); // the probe fails
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 3);
}

#[circuit_breaker(name = "adv-attr-panic-listener", failures = 1, open_for = "10s")]
fn body_panics() -> Result<u32, AppError> {
    panic!("the body panics")
}

#[test]
fn attribute_body_panic_with_a_panicking_listener_does_not_abort() {
    registry().configure(
        "adv-attr-panic-listener",
        Config::builder()
            .failures(1)
            .open_for(10 * S)
            .build()
            .unwrap(),
    );
    let b = registry().get_or_create("adv-attr-panic-listener", Config::default);
    b.on_state_change(|_| panic!("listener panics during the body's unwind"));
    let caught = catch_unwind(body_panics).expect_err("the body's panic resumes");
    assert_eq!(
        caught.downcast_ref::<&str>().copied(),
        Some("the body panics")
    );
    assert_eq!(b.state(), State::Open);
}
