//! Middleware that keeps a loopback server private to its machine: the
//! `Host` check against DNS rebinding, and headers that keep the page from
//! loading anything but its own assets.

use axum::extract::Request;
use axum::http::header::{self, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// Whether a `Host` header names this machine: `localhost`, an IPv4
/// loopback address or `[::1]`, with any port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // "[::1]:8787" → "::1"
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Refuse (421) a request whose `Host` is not a loopback name when the
/// server listens on loopback: a page on another site that rebinds its own
/// host name to 127.0.0.1 still sends that name, so it cannot use the API.
pub(crate) async fn host(loopback_only: bool, req: Request, next: Next) -> Response {
    if loopback_only {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !is_loopback_host(host) {
            return ApiError {
                status: axum::http::StatusCode::MISDIRECTED_REQUEST,
                message: format!(
                    "Host '{host}' is not this machine: meshplan serve answers only localhost, 127.0.0.1 and [::1]"
                ),
            }
            .into_response();
        }
    }
    next.run(req).await
}

/// Security headers on every answer: the page runs only its own script,
/// shows plots as images (an SVG image runs no script), and is not framed.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    for (k, v) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        h.insert(k, HeaderValue::from_static(v));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "LOCALHOST:8787",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.8.9.1:1",
            "[::1]:8787",
            "[::1]",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "",
            "evil.example",
            "evil.example:8787",
            "localhost.evil.example",
            "10.0.0.1:8787",
            "[::2]:1",
            "0.0.0.0:8787",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
