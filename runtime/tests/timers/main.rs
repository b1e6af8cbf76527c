//! The open timer: an open breaker turns half-open when its open time ends without a call
//! (`without_traffic`), under every tokio runtime shape (`runtimes`). No test sleeps.

mod runtimes;
mod without_traffic;
