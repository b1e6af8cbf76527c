//! The bearer token of the controls, compared in constant time.

use axum::http::{HeaderMap, StatusCode, header};

use crate::respond::Problem;

/// The configured token. Its `Debug` never shows it.
pub(crate) struct Token(Box<[u8]>);

impl Token {
    pub(crate) fn new(bytes: Vec<u8>) -> Token {
        Token(bytes.into_boxed_slice())
    }

    /// Whether `given` is the token. The time taken depends on the token's length only: every
    /// byte of the token is compared whatever `given` holds, and a length difference is folded
    /// into the same result instead of returning early.
    pub(crate) fn matches(&self, given: &[u8]) -> bool {
        let token = &self.0;
        // Non-zero when the lengths differ, with no branch on it.
        let mut diff = (token.len() ^ given.len()) as u64;
        for (i, &t) in token.iter().enumerate() {
            // A shorter `given` is read as zeros past its end; its length already differs.
            let g = given.get(i).copied().unwrap_or(0);
            diff |= u64::from(t ^ g);
        }
        // Keeps the optimizer from turning the loop into an early exit.
        core::hint::black_box(diff) == 0
    }
}

/// Checks the request's `Authorization: Bearer <token>` against `token`: `403` when the router
/// has no token (the controls are off), `401` when the header is missing, not a bearer, or
/// holds another token.
pub(crate) fn authorize(token: Option<&Token>, headers: &HeaderMap) -> Result<(), Problem> {
    let Some(token) = token else {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "the controls are off: this admin router was built without a token; build it with \
             `Admin::new().token(...)` to turn them on",
        ));
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "missing token: send the header `Authorization: Bearer <token>`",
        ));
    };
    let bytes = value.as_bytes();
    let scheme = b"Bearer ";
    if bytes.len() < scheme.len() || !bytes[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "the Authorization header is not a bearer token: send `Authorization: Bearer <token>`",
        ));
    }
    if !token.matches(&bytes[scheme.len()..]) {
        return Err(Problem::new(StatusCode::UNAUTHORIZED, "wrong token"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = Token::new(b"s3cret".to_vec());
        assert!(token.matches(b"s3cret"));
        for other in [
            &b""[..],
            b"s3cre",
            b"s3cret ",
            b"s3cret\0",
            b"S3cret",
            b"s3creu",
            b"xs3cret",
        ] {
            assert!(
                !token.matches(other),
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn a_prefix_padded_with_zeros_is_not_the_token() {
        // The comparison reads a short `given` as zeros past its end: the length must still
        // make it differ.
        let token = Token::new(b"ab\0\0".to_vec());
        assert!(!token.matches(b"ab"));
        assert!(token.matches(b"ab\0\0"));
    }
}
