//! A fallback or classifier declared inside the function's body is out of the attribute's
//! reach: the body is wrapped. The error says so, rather than that the function is not found.
use breakerbox::{Outcome, circuit_breaker};

pub struct Response(u16);

#[circuit_breaker(classify = by_status, fallback = degraded)]
fn get(path: &str) -> Response {
    fn by_status(response: &Response) -> Outcome {
        if response.0 >= 500 { Outcome::Failure } else { Outcome::Success }
    }
    fn degraded(_path: &str) -> Response {
        Response(203)
    }
    Response(if path.is_empty() { 500 } else { 200 })
}

fn main() {
    let _ = get("x");
}
