//! With a fallback but no classifier, the return type must be a `Result`.
use breakerbox::circuit_breaker;

fn zero() -> u32 {
    0
}

#[circuit_breaker(fallback = zero)]
fn answer() -> u32 {
    42
}

fn main() {}
