//! The `#[circuit_breaker]` attribute of [breakerbox](https://docs.rs/breakerbox).
//!
//! Use it through the `breakerbox` crate, which re-exports it next to the runtime it
//! expands to; the documentation lives on [`macro@circuit_breaker`].

mod args;
mod duration;
mod expand;
mod func;

use proc_macro::TokenStream;

/// Placeholder docs, replaced below.
#[proc_macro_attribute]
pub fn circuit_breaker(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}
