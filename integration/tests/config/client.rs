//! A function under the attribute's default name, `config::client::fetch_user` (this
//! module's path), which `config` addresses by that name.

use breakerbox::circuit_breaker;

use crate::support::AppError;

#[circuit_breaker(failures = 5, open_for = "1m")]
pub fn fetch_user(up: bool) -> Result<u32, AppError> {
    if up { Ok(1) } else { Err(AppError::Panicky) }
}
