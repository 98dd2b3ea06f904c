//! The page's files, embedded in the binary with `include_str!` (plain
//! HTML, JS and CSS: nothing to build, nothing fetched from a CDN).

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../static/index.html");
const APP_JS: &str = include_str!("../static/app.js");
const STYLE: &str = include_str!("../static/style.css");

fn file(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

/// `/`, `/app.js`, `/style.css`.
pub(crate) fn routes() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { file("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/app.js",
            get(|| async { file("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/style.css",
            get(|| async { file("text/css; charset=utf-8", STYLE) }),
        )
}
