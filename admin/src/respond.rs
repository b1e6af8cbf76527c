//! How every route answers: a `200` JSON body ([`json`]), or a 4xx [`Problem`] as
//! `{"error": "<sentence>", "status": <code>}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A 4xx answer: `{"error": "...", "status": n}`.
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Problem {
        Problem {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message, "status": self.status.as_u16() });
        let mut response = json(&body);
        *response.status_mut() = self.status;
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// `value` as a `200` JSON answer, never cached.
pub(crate) fn json(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        // Our views hold strings, numbers and maps with string keys only.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
