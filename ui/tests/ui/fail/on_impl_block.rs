//! The attribute goes on each method, not on the `impl` block.
use breakerbox::circuit_breaker;

pub struct Client;

#[circuit_breaker]
impl Client {
    pub fn get(&self) -> u32 {
        1
    }
}

fn main() {
    let _ = Client.get();
}
