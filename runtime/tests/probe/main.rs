//! Health probes: on the manual clock (`manual_clock`), at most one probe function at a time
//! and the timers' thread kept alive (`one_at_a_time`), under contention (`contention`), and
//! on tokio (`on_tokio`, `tokio_origin`). Nothing sleeps: each test waits for its probes by
//! their counts.

#[allow(dead_code)]
#[path = "../common/alone.rs"]
mod alone;
mod contention;
mod manual_clock;
mod on_tokio;
mod one_at_a_time;
mod tokio_origin;
