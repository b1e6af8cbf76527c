//! The attribute goes on functions.
use breakerbox::circuit_breaker;

#[circuit_breaker]
struct Client {
    url: String,
}

fn main() {
    let _ = Client { url: String::new() }.url;
}
