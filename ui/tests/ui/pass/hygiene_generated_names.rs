//! User names that look like generated ones, or like the helpers' names, do not collide
//! (cached #230: generated names collided with user arguments named `key` and `result`).
#![allow(clippy::shadow_unrelated)]
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

// Shadow the prelude names the generated code could have used.
type Result<T> = std::result::Result<T, Error>;
#[allow(dead_code)]
struct Option;
#[allow(dead_code)]
struct Duration;
#[allow(dead_code)]
struct LazyLock;
#[allow(dead_code)]
fn reject() {}
#[allow(dead_code)]
fn classify() {}

#[circuit_breaker]
fn call(
    __breakerbox_result: u32,
    __breakerbox_permit: u32,
    permit: u32,
    result: u32,
    breaker: u32,
    outcome: u32,
) -> Result<u32> {
    static __BREAKERBOX_BREAKER: u32 = 1;
    let __breakerbox_outcome = __breakerbox_result + __breakerbox_permit;
    Ok(__breakerbox_outcome + permit + result + breaker + outcome + __BREAKERBOX_BREAKER)
}

fn fallback(
    __breakerbox_rejected: u32,
    __breakerbox_once: u32,
) -> Result<u32> {
    Ok(__breakerbox_rejected + __breakerbox_once)
}

#[circuit_breaker(fallback = fallback)]
fn call_with_fallback(__breakerbox_rejected: u32, __breakerbox_once: u32) -> Result<u32> {
    Ok(__breakerbox_rejected * __breakerbox_once)
}

/// The body shadows its arguments; the fallback still gets the originals.
#[circuit_breaker(fallback = fallback_one)]
fn shadowing(n: u32) -> Result<u32> {
    let n = n * 10;
    let n = n + 1;
    Ok(n)
}

/// Functions produced by `macro_rules!`, with their names and arguments passed in.
macro_rules! wrapped {
    ($name:ident, $arg:ident) => {
        #[circuit_breaker(fallback = fallback_one)]
        fn $name($arg: u32) -> Result<u32> {
            Ok($arg + 1)
        }
    };
}

fn fallback_one(n: u32) -> Result<u32> {
    Ok(n)
}

wrapped!(from_macro, value);

fn main() {
    assert_eq!(call(1, 2, 3, 4, 5, 6).unwrap(), 22);
    assert_eq!(call_with_fallback(2, 3).unwrap(), 6);
    assert_eq!(from_macro(1).unwrap(), 2);
    assert_eq!(shadowing(1).unwrap(), 11);
    let _ = fallback(0, 0);
}
