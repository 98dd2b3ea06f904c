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
otherwise; it answers only requests whose `Host` is a loopback name (a web
page elsewhere cannot reach it through DNS rebinding); API calls must be
`application/json` (a cross-site form cannot post one without a CORS
preflight, which is never granted); bodies are capped at
[`MAX_BODY_BYTES`]; plan searches are capped at [`MAX_SEARCH_CHIPS`] chips
and [`MAX_TOP`] listed plans and run one at a time; bad input is a 4xx JSON
`{"error": …}` with the core's message, and a panic is a 500, never a
dropped connection.
*/

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use meshplan_core::Catalog;

mod api;
mod assets;
mod error;
mod guard;
mod request;

pub use error::ApiError;

/// Port `meshplan serve` listens on by default.
pub const DEFAULT_PORT: u16 = 8787;

/// Largest request body: a scenario is a few hundred bytes and a pasted
/// `config.json` a few kilobytes, so 1 MiB leaves room without letting a
/// client make the server buffer an unbounded upload.
pub const MAX_BODY_BYTES: usize = 1 << 20;

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
/// and the one-search-at-a-time permit.
pub(crate) struct AppState {
    pub catalog: Catalog,
    pub searches: tokio::sync::Semaphore,
}

/// The whole application: page, assets and API, with the body limit, the
/// `Host` check (when `loopback_only`), security headers and panic guard.
pub fn router(catalog: Catalog, loopback_only: bool) -> Router {
    let state = Arc::new(AppState {
        catalog,
        searches: tokio::sync::Semaphore::new(1),
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

/// Serve [`router`] on `listener` until Ctrl-C.
pub async fn serve(
    listener: tokio::net::TcpListener,
    catalog: Catalog,
    loopback_only: bool,
) -> std::io::Result<()> {
    axum::serve(listener, router(catalog, loopback_only))
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
}
