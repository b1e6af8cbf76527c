//! A function that does not return a `Result` needs a fallback and a classifier.
use breakerbox::circuit_breaker;

#[circuit_breaker]
fn answer() -> u32 {
    42
}

fn main() {}
