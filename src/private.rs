//! Support for generated code. Not public API.
