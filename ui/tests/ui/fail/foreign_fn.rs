//! A function declared in an `extern` block has no body to wrap.
use breakerbox::circuit_breaker;

unsafe extern "C" {
    #[circuit_breaker]
    fn abs(input: i32) -> i32;

    #[circuit_breaker]
    safe fn labs(input: i64) -> i64;
}

fn main() {}
