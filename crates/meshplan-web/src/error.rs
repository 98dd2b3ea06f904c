//! The API's one error shape: a status and `{"error": MESSAGE}`, where the
//! message of bad input is the core's (the CLI prints the same text after
//! `error:`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status (4xx for the client's mistakes, 5xx for ours).
    pub status: StatusCode,
    /// The message shown to the user.
    pub message: String,
}

impl ApiError {
    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// 404 for a path the server does not have.
    pub fn not_found() -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: "no such page or endpoint (see docs/web.md)".into(),
        }
    }

    /// 405 for a method a path does not take.
    pub fn method_not_allowed() -> ApiError {
        ApiError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            message: "method not allowed: the API's endpoints take POST with a JSON body, /api/catalog GET".into(),
        }
    }

    /// 500: a bug of ours, reported rather than hidden.
    pub fn internal(what: &str) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("internal error: {what} (a bug in meshplan; please report it)"),
        }
    }
}

impl From<meshplan_core::Error> for ApiError {
    fn from(e: meshplan_core::Error) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

/// Longest error message sent back: the core's messages are a few lines;
/// one that quotes a huge input is cut here rather than echoed whole.
pub const MAX_MESSAGE_CHARS: usize = 2000;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match self.message.char_indices().nth(MAX_MESSAGE_CHARS) {
            None => self.message,
            Some((i, _)) => format!("{}… (message cut)", &self.message[..i]),
        };
        let body = serde_json::json!({ "error": message });
        (self.status, Json(body)).into_response()
    }
}

/// What `CatchPanicLayer` answers when a handler panics: the connection
/// gets a 500 JSON error instead of being dropped.
pub(crate) fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("the request handler panicked").into_response()
}
