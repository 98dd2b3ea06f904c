//! Hostile HTTP against a real server on 127.0.0.1 (an ephemeral port):
//! each case gets a clear 4xx (or a closed connection, for a stalled
//! client) within 5 s, and the server answers the next request after it.
//! Every socket read has a timeout and every loop a bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use meshplan_core::Catalog;
use serde_json::{json, Value};

/// The idle timeout the test server runs with.
const IDLE: Duration = Duration::from_millis(800);

/// Start `meshplan serve`'s server on 127.0.0.1:0 in a background thread
/// (its runtime lives as long as the test process).
fn server(loopback_only: bool) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            meshplan_web::serve_with_idle(l, Catalog::builtin().clone(), loopback_only, IDLE)
                .await
                .unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Send raw bytes, read the whole answer (the server closes: `Connection:
/// close`): (status, JSON body, body length, seconds taken).
fn raw(addr: SocketAddr, bytes: &[u8]) -> (u16, Value, usize, f64) {
    let t0 = Instant::now();
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v = serde_json::from_str(body).unwrap_or(Value::Null);
    (status, v, body.len(), t0.elapsed().as_secs_f64())
}

fn post(
    addr: SocketAddr,
    host: &str,
    path: &str,
    ct: &str,
    body: &[u8],
) -> (u16, Value, usize, f64) {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(addr, &req)
}

/// The server still answers: the catalog, 200, within 5 s.
fn still_answers(addr: SocketAddr) {
    let (s, v, _, t) = raw(
        addr,
        b"GET /api/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(s, 200, "{v}");
    assert!(v["models"].is_array());
    assert!(t < 5.0, "{t} s");
}

fn train_body() -> Value {
    json!({ "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 8 } } })
}

#[test]
fn trailing_bytes_after_the_json_are_refused() {
    let addr = server(true);
    let mut body = train_body().to_string().into_bytes();
    body.extend_from_slice(b" {\"more\": 1}");
    let (s, v, _, t) = post(addr, "127.0.0.1", "/api/train", "application/json", &body);
    assert_eq!(s, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("trailing"), "{v}");
    assert!(t < 5.0);
    // the same body without the tail is fine
    let ok = train_body().to_string();
    let (s, v, _, _) = post(
        addr,
        "127.0.0.1",
        "/api/train",
        "application/json",
        ok.as_bytes(),
    );
    assert_eq!(s, 200, "{v}");
    still_answers(addr);
}

#[test]
fn content_type_must_be_exactly_json() {
    let addr = server(true);
    let body = train_body().to_string();
    for ct in [
        "application/jsonx",
        "application/json-seq",
        "text/json",
        "application/json+evil",
    ] {
        let (s, v, _, t) = post(addr, "127.0.0.1", "/api/train", ct, body.as_bytes());
        assert_eq!(s, 415, "{ct}: {v}");
        assert!(t < 5.0);
    }
    for ct in ["application/json", "Application/JSON; charset=utf-8"] {
        let (s, v, _, _) = post(addr, "127.0.0.1", "/api/train", ct, body.as_bytes());
        assert_eq!(s, 200, "{ct}: {v}");
    }
    still_answers(addr);
}

#[test]
fn a_megabyte_name_is_refused_at_once_and_not_echoed() {
    let addr = server(true);
    let name = "x".repeat(1_000_000);
    let body = json!({ "scenario": { "model": { "name": name }, "hardware": { "chip": "h100", "chips": 8 } } })
        .to_string();
    let (s, v, len, t) = post(
        addr,
        "127.0.0.1",
        "/api/train",
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(s, 400, "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.starts_with("scenario.model.name: a string of 1000000 bytes"),
        "{e}"
    );
    assert!(len < 1000, "answer of {len} bytes");
    assert!(t < 5.0, "{t} s");
    // a long chip name too, and a long key
    let body = json!({ "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h".repeat(300) } } })
        .to_string();
    let (s, v, _, _) = post(
        addr,
        "127.0.0.1",
        "/api/train",
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("scenario.hardware.chip"),
        "{v}"
    );
    still_answers(addr);
}

#[test]
fn a_stalled_client_is_disconnected() {
    let addr = server(true);
    let t0 = Instant::now();
    let mut s = connect(addr);
    // half a request, then silence
    s.write_all(b"POST /api/train HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        .unwrap();
    let mut buf = [0u8; 512];
    // the server closes (EOF or reset) after IDLE, well before our 5 s timeout
    let r = s.read(&mut buf);
    let t = t0.elapsed().as_secs_f64();
    assert!(matches!(r, Ok(0) | Err(_)) || r.is_ok(), "{r:?}");
    assert!(t < 4.0, "closed after {t} s (idle timeout {IDLE:?})");
    // a complete request with a body that never comes, too
    let mut s = connect(addr);
    s.write_all(b"POST /api/train HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(t0.elapsed().as_secs_f64() < 4.0);
    still_answers(addr);
}

#[test]
fn beyond_loopback_host_names_are_refused_but_addresses_pass() {
    // what --allow-remote serves: the Host check stays on, for names
    let addr = server(false);
    let body = train_body().to_string();
    let (s, v, _, _) = post(
        addr,
        "evil.example:8787",
        "/api/train",
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(s, 421, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("DNS rebinding"),
        "{v}"
    );
    for host in ["192.168.1.5:8787", "127.0.0.1", "localhost"] {
        let (s, v, _, _) = post(
            addr,
            host,
            "/api/train",
            "application/json",
            body.as_bytes(),
        );
        assert_eq!(s, 200, "{host}: {v}");
    }
    still_answers(addr);
}

/// The documented caps allow a huge batch: the "what would fit" pass is
/// bounded (a fixed number of probes), so the answer comes in seconds.
#[test]
fn a_huge_batch_search_is_bounded() {
    let addr = server(true);
    let body = json!({
        "scenario": { "model": { "name": "llama-3-8b" }, "hardware": { "chip": "h100", "chips": 64 },
                      "training": { "batch_tokens": 4.5e13 } },
        "top": 1,
    })
    .to_string();
    let (s, v, _, t) = post(
        addr,
        "127.0.0.1",
        "/api/plan/train",
        "application/json",
        body.as_bytes(),
    );
    assert_eq!(s, 200, "{v}");
    assert!(v["report"]["verdict"].is_string(), "{v}");
    assert!(t < 5.0, "{t} s");
    still_answers(addr);
}
