/*!
`meshplan serve`: a local web page and a JSON API over `meshplan-core`'s
reports (docs/web.md).

The page (plain HTML, JS and CSS embedded in the binary: no CDN, no npm
build) lets a user pick a model — a catalog name or a pasted `config.json` —
a chip, the chips or mesh and a workload, and shows the same report the CLI
prints (the core's [`meshplan_core::view::Doc`]), its derivation, the
`meshplan-plot` SVGs and the planner's ranked plans. Every endpoint turns a
scenario (the scenario file's sections as JSON) into the report with the
very functions `meshplan train|infer|plan` and the Python package call, so
the three front ends give identical numbers.

Safety for a server on the user's machine: it binds to loopback unless told
otherwise (and warns loudly on stderr when told); it answers only requests
whose `Host` is a loopback name — or, bound beyond loopback, an IP address
literal — so a web page elsewhere cannot reach it through DNS rebinding;
API calls must be exactly `application/json` (a cross-site form cannot post
one without a CORS preflight, which is never granted) holding one JSON
object and nothing after it; bodies are capped at [`MAX_BODY_BYTES`] and
strings in them at [`MAX_STRING_BYTES`]; a connection idle for
[`IDLE_TIMEOUT`] is closed; plan searches are capped at
[`MAX_SEARCH_CHIPS`] chips and [`MAX_TOP`] listed plans and run one at a
time — the permit is held by the worker until the search really ends, even
when its client has left; bad input is a 4xx JSON `{"error": …}` with the
core's message, and a panic is a 500, never a dropped connection.
*/

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use meshplan_core::Catalog;

mod api;
mod assets;
mod error;
mod guard;
mod idle;
mod request;

pub use error::ApiError;

/// Port `meshplan serve` listens on by default.
pub const DEFAULT_PORT: u16 = 8787;

/// Largest request body: a scenario is a few hundred bytes and a pasted
/// `config.json` a few kilobytes, so 1 MiB leaves room without letting a
/// client make the server buffer an unbounded upload.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Longest string in a request other than a pasted `config.json`: names
/// of models, chips and options are tens of bytes, and a megabyte name cost
/// seconds of "did you mean" matching before it was refused here.
pub const MAX_STRING_BYTES: usize = 256;

/// A connection that neither sends nor receives a byte for this long is
/// closed (a client that opens connections and stalls cannot hold them).
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Most chips a plan search may cover through the web API: four times the
/// 16,384-GPU search the benchmark times (under a second), so no request
/// ties the machine up for long; the CLI has no such cap.
pub const MAX_SEARCH_CHIPS: u64 = 65_536;

/// Most plans a search lists through the web API.
pub const MAX_TOP: usize = 100;

/// Flags of `meshplan serve` (parsed by the CLI, defined here so the CLI
/// only wires the subcommand).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Port to listen on (0 = any free port; the URL is printed).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to bind: a loopback address (127.0.0.1, ::1) unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub addr: IpAddr,
    /// Allow a non-loopback --addr: anyone who can reach it can run searches.
    #[arg(long)]
    pub allow_remote: bool,
}

/// What every handler shares: the catalog (built-in plus `--catalog DIR`)
/// and the one-search-at-a-time permit (owned by the worker that runs a
/// search, so it is held until the search ends).
pub(crate) struct AppState {
    pub catalog: Catalog,
    pub searches: Arc<tokio::sync::Semaphore>,
}

/// The whole application: page, assets and API, with the body limit, the
/// `Host` check (loopback names only when `loopback_only`, else loopback
/// names or IP literals), security headers and panic guard.
pub fn router(catalog: Catalog, loopback_only: bool) -> Router {
    let state = Arc::new(AppState {
        catalog,
        searches: Arc::new(tokio::sync::Semaphore::new(1)),
    });
    let api = Router::new()
        .route("/api/catalog", get(api::catalog))
        .route("/api/train", post(api::handle::<api::Train>))
        .route("/api/infer", post(api::handle::<api::Infer>))
        .route("/api/plan/train", post(api::handle::<api::PlanTrain>))
        .route("/api/plan/infer", post(api::handle::<api::PlanInfer>))
        .with_state(state);
    assets::routes()
        .merge(api)
        .fallback(|| async { ApiError::not_found() })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(guard::headers))
        .layer(axum::middleware::from_fn(move |req, next| {
            guard::host(loopback_only, req, next)
        }))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            error::panic_response,
        ))
}

/// Serve [`router`] on `listener` until Ctrl-C, closing connections idle
/// for [`IDLE_TIMEOUT`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    catalog: Catalog,
    loopback_only: bool,
) -> std::io::Result<()> {
    serve_with_idle(listener, catalog, loopback_only, IDLE_TIMEOUT).await
}

/// [`serve`] with another idle timeout (tests use a short one).
pub async fn serve_with_idle(
    listener: tokio::net::TcpListener,
    catalog: Catalog,
    loopback_only: bool,
    idle: Duration,
) -> std::io::Result<()> {
    let listener = idle::IdleListener::new(listener, idle);
    let app = router(catalog, loopback_only).layer(axum::middleware::from_fn(idle::busy));
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<idle::Busy>(),
    )
    .with_graceful_shutdown(async {
        // Ctrl-C ends the server; if the signal cannot be watched the
        // server runs until killed
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    })
    .await
}

/// `meshplan serve`: check the address, bind, print the URL (stdout, one
/// line, so a script or test can read the port chosen for `--port 0`) and
/// serve until Ctrl-C.
pub fn run(args: &ServeArgs, catalog: Catalog) -> std::io::Result<()> {
    let loopback = args.addr.is_loopback();
    if !loopback && !args.allow_remote {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "--addr {} is not a loopback address: meshplan serve has no authentication, so it listens on 127.0.0.1 or ::1 unless --allow-remote is given",
                args.addr
            ),
        ));
    }
    if !loopback {
        warn_remote(args.addr);
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.addr, args.port))
            .await
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot listen on {}:{}: {e}", args.addr, args.port),
                )
            })?;
        announce(listener.local_addr()?)?;
        serve(listener, catalog, loopback).await
    })
}

/// The warning `--allow-remote` prints: the server has no authentication,
/// and every interface (0.0.0.0, ::) is the whole network.
pub fn remote_warning(addr: IpAddr) -> String {
    let all = if addr.is_unspecified() {
        " — that is EVERY network interface of this machine"
    } else {
        ""
    };
    format!(
        "WARNING: meshplan serve is listening on {addr}{all}. It has no authentication: \
         anyone who can reach this port can run plan searches (one at a time, capped) and read the catalog. \
         Requests must name the server by IP address or localhost in Host (a host name is refused, \
         which keeps DNS rebinding out). Use the default 127.0.0.1 unless you mean this."
    )
}

/// Print [`remote_warning`] to stderr (best effort: a closed stderr does
/// not stop the server).
fn warn_remote(addr: IpAddr) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{}", remote_warning(addr));
}

/// Print `meshplan serve: http://ADDR/` and flush it.
fn announce(addr: SocketAddr) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "meshplan serve: http://{addr}/ (Ctrl-C stops it)")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_address_needs_allow_remote() {
        let args = ServeArgs {
            port: 0,
            addr: "0.0.0.0".parse().unwrap(),
            allow_remote: false,
        };
        let e = run(&args, Catalog::builtin().clone()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("--allow-remote"), "{e}");
    }

    #[test]
    fn every_interface_is_named_in_the_warning() {
        let w = remote_warning("0.0.0.0".parse().unwrap());
        assert!(w.starts_with("WARNING"), "{w}");
        assert!(w.contains("EVERY network interface"), "{w}");
        assert!(w.contains("no authentication"), "{w}");
        let w = remote_warning("192.168.1.5".parse().unwrap());
        assert!(!w.contains("EVERY"), "{w}");
    }
}
