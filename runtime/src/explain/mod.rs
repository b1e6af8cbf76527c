//! `Breaker::explain`: why a breaker is in its state, as data and as a sentence. The data
//! model is in `model.rs`; `text.rs` turns it into sentences.

mod model;
#[cfg(all(test, not(loom)))]
mod tests;
mod text;

pub use model::{Cause, Explanation, Progress};
pub(crate) use model::{Parts, Why};
pub(crate) use text::Human;
