//! The bearer tokens of the controls, each with a label that names who holds it, compared in
//! constant time.

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

/// The tokens the router takes, each with its label (who holds it: `"alice"`, `"deploy-bot"`).
#[derive(Default)]
pub(crate) struct Tokens(Vec<(String, Token)>);

impl Tokens {
    /// Adds `token` under `label`, replacing a token of that label; an empty token only
    /// removes it.
    ///
    /// Whitespace around the token is dropped first: an HTTP header value cannot start or end
    /// with it (a server strips it as it reads the header), so a token kept with it, such as
    /// one read from a file with its final newline, would refuse every request.
    pub(crate) fn set(&mut self, label: String, token: String) {
        self.0.retain(|(l, _)| *l != label);
        let token = token.trim_ascii();
        if !token.is_empty() {
            self.0.push((label, Token::new(token.as_bytes().to_vec())));
        }
    }

    /// Whether any token is set (the controls are on).
    pub(crate) fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// The labels, in the order they were given.
    pub(crate) fn labels(&self) -> Vec<&str> {
        self.0.iter().map(|(l, _)| l.as_str()).collect()
    }

    /// The label of the token `given` is, comparing it with every token (each in constant
    /// time, none skipped), so the time taken does not say which one matched.
    fn label_of(&self, given: &[u8]) -> Option<&str> {
        let mut found = None;
        for (label, token) in &self.0 {
            if token.matches(given) && found.is_none() {
                found = Some(label.as_str());
            }
        }
        found
    }
}

/// Checks the request's `Authorization: Bearer <token>` against `tokens`, and answers the
/// label of the token it holds: `403` when the router has no token (the controls are off),
/// `401` when the header is missing, not a bearer, or holds no token of the router's.
pub(crate) fn authorize<'t>(tokens: &'t Tokens, headers: &HeaderMap) -> Result<&'t str, Problem> {
    if !tokens.any() {
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
    // RFC 6750's `"Bearer" 1*SP b64token`: the scheme may be followed by several spaces.
    let given = &bytes[scheme.len()..];
    let given = &given[given.iter().take_while(|&&b| b == b' ').count()..];
    tokens
        .label_of(given)
        .ok_or_else(|| Problem::new(StatusCode::UNAUTHORIZED, "wrong token"))
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
    fn each_token_answers_its_own_label() {
        let mut tokens = Tokens::default();
        tokens.set("alice".into(), "a-secret".into());
        tokens.set("bot".into(), "b-secret".into());
        assert_eq!(tokens.label_of(b"a-secret"), Some("alice"));
        assert_eq!(tokens.label_of(b"b-secret"), Some("bot"));
        assert_eq!(tokens.label_of(b"c-secret"), None);
        tokens.set("alice".into(), String::new());
        assert_eq!(tokens.label_of(b"a-secret"), None);
        assert_eq!(tokens.labels(), ["bot"]);
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
