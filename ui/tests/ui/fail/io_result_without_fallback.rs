//! `io::Result` cannot carry a rejection: `std::io::Error` is another crate's type, which the
//! user cannot give `From<Rejected>`; the error says what to return instead.
use std::io;

use breakerbox::circuit_breaker;

#[circuit_breaker]
fn read(path: &str) -> io::Result<usize> {
    Ok(path.len())
}

fn main() {
    let _ = read("x");
}
