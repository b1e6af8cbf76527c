//! Valid function shapes `#[circuit_breaker]` must compile as written: a parameter under `#[cfg]`
//! with a fallback, and a function without a return type whose body diverges.
#![allow(missing_docs)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Waker};

use crate::support::ApiError;
use breakerbox::{State, circuit_breaker, registry};

fn cfg_fallback(#[cfg(any())] a: u32, b: u32) -> Result<u32, ApiError> {
    Ok(b + 100)
}

/// `a` is configured out: neither a parameter nor an argument of the fallback call.
#[circuit_breaker(name = "shapes-cfg-argument", failures = 1, fallback = cfg_fallback)]
fn cfg_argument(#[cfg(any())] a: u32, b: u32) -> Result<u32, ApiError> {
    if b == 0 { Err(ApiError::Down) } else { Ok(b) }
}

#[test]
fn a_configured_out_parameter_is_not_passed_to_the_fallback() {
    assert_eq!(cfg_argument(2).unwrap(), 2);
    assert!(cfg_argument(0).is_err(), "the failure that trips it");
    assert_eq!(
        cfg_argument(3).unwrap(),
        103,
        "open: the fallback answers with `b`"
    );
}

fn idle() {}

async fn idle_async() {}

/// A stub: no return type, a body that diverges.
#[circuit_breaker(name = "shapes-diverging", failures = 1, fallback = idle)]
fn stub() {
    todo!()
}

#[circuit_breaker(name = "shapes-diverging-async", failures = 1, fallback = idle_async)]
async fn stub_async() {
    todo!()
}

#[test]
fn a_unit_function_whose_body_diverges_compiles_and_its_panic_is_a_failure() {
    assert!(catch_unwind(stub).is_err());
    let b = registry().get("shapes-diverging").unwrap();
    assert_eq!(b.state(), State::Open);
    stub(); // the fallback answers

    let cx = &mut Context::from_waker(Waker::noop());
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _ = pin!(stub_async()).poll(cx);
    }));
    assert!(unwound.is_err());
    assert_eq!(
        registry().get("shapes-diverging-async").unwrap().state(),
        State::Open
    );
    assert!(
        pin!(stub_async()).poll(cx).is_ready(),
        "the fallback answers"
    );
}
