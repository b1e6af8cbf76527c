//! The `#[circuit_breaker]` attribute. Use it through `breakerbox`.
use proc_macro::TokenStream;

/// Placeholder.
#[proc_macro_attribute]
pub fn circuit_breaker(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}
