//! Middleware that keeps a loopback server private to its machine: the
//! `Host` check against DNS rebinding, and headers that keep the page from
//! loading anything but its own assets.

use axum::extract::Request;
use axum::http::header::{self, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// The name part of a `Host` header: "[::1]:8787" → "::1", "a:80" → "a".
fn host_name(host: &str) -> &str {
    match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    }
}

/// Whether a `Host` header names this machine: `localhost`, an IPv4
/// loopback address or `[::1]`, with any port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = host_name(host);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a `Host` header is allowed when the server listens beyond
/// loopback (`--allow-remote`): a loopback name or an IP address literal.
/// DNS rebinding needs a host name the attacker controls, so refusing
/// every name keeps it out while a colleague can still type the address.
pub(crate) fn is_remote_host_allowed(host: &str) -> bool {
    is_loopback_host(host) || host_name(host).parse::<std::net::IpAddr>().is_ok()
}

/// Refuse (421) a request whose `Host` is not allowed: on loopback, any
/// name but a loopback one (a page on another site that rebinds its own
/// host name to 127.0.0.1 still sends that name, so it cannot use the
/// API); beyond loopback, any host name (IP literals and localhost pass).
pub(crate) async fn host(loopback_only: bool, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let (ok, allowed) = if loopback_only {
        (is_loopback_host(host), "localhost, 127.0.0.1 and [::1]")
    } else {
        (
            is_remote_host_allowed(host),
            "localhost and IP addresses (host names are refused against DNS rebinding)",
        )
    };
    if !ok {
        return ApiError {
            status: axum::http::StatusCode::MISDIRECTED_REQUEST,
            message: format!(
                "Host '{}' is not this machine: meshplan serve answers only {allowed}",
                crate::request::prefix(host)
            ),
        }
        .into_response();
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
    use super::{is_loopback_host, is_remote_host_allowed};

    #[test]
    fn remote_hosts_are_addresses() {
        for h in [
            "192.168.1.5:8787",
            "[fe80::1]:8787",
            "10.0.0.1",
            "localhost:1",
        ] {
            assert!(is_remote_host_allowed(h), "{h}");
        }
        for h in ["", "evil.example", "evil.example:8787", "mybox.lan:8787"] {
            assert!(!is_remote_host_allowed(h), "{h}");
        }
    }

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
