//! nccl-tests logs (`all_reduce_perf`, `all_gather_perf`,
//! `reduce_scatter_perf`, `alltoall_perf` stdout, any node count) and the
//! α–β fit of each: a collective over `n` ranks moving `S` bytes takes
//! `α + B/β` with `B` its bus bytes (`2(n−1)/n · S` for an all-reduce,
//! `(n−1)/n · S` otherwise: nccl-tests' busbw convention, which is the
//! calibrated pricer's `bytes_per_call`), so `β` is the bus bandwidth the
//! pricer divides by and `α/(n − 1)` its latency per ring step.

use crate::collectives::Collective;
use crate::error::Result;
use crate::fidelity::perr_at;

/// The test programs and the collective each measures.
pub const PROGRAMS: [(&str, Collective); 4] = [
    ("all_reduce_perf", Collective::AllReduce),
    ("all_gather_perf", Collective::AllGather),
    ("reduce_scatter_perf", Collective::ReduceScatter),
    ("alltoall_perf", Collective::AllToAll),
];

/// The collective a `KIND=` prefix or a file name names (`all_reduce`,
/// `allreduce`, `all_reduce_perf`, …).
pub fn kind_of_name(name: &str) -> Option<Collective> {
    let n = name.to_lowercase().replace(['-', '_'], "");
    [
        ("allreduce", Collective::AllReduce),
        ("allgather", Collective::AllGather),
        ("reducescatter", Collective::ReduceScatter),
        ("alltoall", Collective::AllToAll),
    ]
    .into_iter()
    .find(|(k, _)| n.contains(k))
    .map(|x| x.1)
}

/// One row of the table, one placement (out-of-place or in-place).
#[derive(Clone, Debug, PartialEq)]
pub struct NcclPoint {
    /// Line in the file.
    pub line: usize,
    /// `size` column, bytes.
    pub size_bytes: f64,
    /// Seconds (the `time` column, µs).
    pub time_s: f64,
    /// The `busbw` column, GB/s.
    pub busbw_gbs: f64,
    /// In-place block of the row.
    pub in_place: bool,
}

/// One nccl-tests log.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclLog {
    /// File name.
    pub file: String,
    /// The collective.
    pub kind: Collective,
    /// GPUs (ranks) in the test.
    pub ranks: u64,
    /// Distinct hosts among the ranks.
    pub nodes: u64,
    /// The measurements.
    pub points: Vec<NcclPoint>,
}

impl NcclLog {
    /// Bus bytes per byte of `size`: `2(n−1)/n` all-reduce, `(n−1)/n` else.
    pub fn bus_factor(&self) -> f64 {
        let n = self.ranks as f64;
        let f = (n - 1.0) / n;
        if self.kind == Collective::AllReduce {
            2.0 * f
        } else {
            f
        }
    }
}

fn hashless(line: &str) -> Option<Vec<&str>> {
    line.trim()
        .strip_prefix('#')
        .map(|r| r.split_whitespace().collect())
}

/// Read one nccl-tests log. The collective is the program the log names
/// (`# Collective test starting: all_reduce_perf`, or a command line in
/// it; a log naming several is refused), else `kind` (a `KIND=FILE`
/// prefix: an error when the log names another), else the file name; the
/// ranks and nodes are the `#  Rank … on HOST device …` lines.
pub fn parse(src: &str, file: &str, kind: Option<Collective>) -> Result<NcclLog> {
    let named: Vec<&(&str, Collective)> =
        PROGRAMS.iter().filter(|(p, _)| src.contains(p)).collect();
    if named.len() > 1 {
        let n: Vec<&str> = named.iter().map(|x| x.0).collect();
        return Err(perr_at(
            file,
            1,
            None,
            format!(
                "the log names several tests ({}): give one log per test",
                n.join(", ")
            ),
        ));
    }
    let named = named.first().map(|x| x.1);
    if let (Some(n), Some(k)) = (named, kind) {
        if n != k {
            return Err(perr_at(
                file,
                1,
                None,
                format!(
                    "the log is a {} test, not the {} its KIND= prefix or file name says",
                    n.name(),
                    k.name()
                ),
            ));
        }
    }
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    let kind = named.or(kind).or_else(|| kind_of_name(base)).ok_or_else(|| {
        perr_at(
            file,
            1,
            None,
            "cannot tell the collective: the log names no all_reduce_perf / all_gather_perf / reduce_scatter_perf / alltoall_perf; prefix the file with KIND= (e.g. all_reduce=FILE)",
        )
    })?;
    let mut hosts: Vec<&str> = Vec::new();
    let mut ranks = 0u64;
    let mut header: Option<Vec<&str>> = None;
    let mut points = Vec::new();
    for (i, raw) in src.lines().enumerate() {
        let line = i + 1;
        if let Some(toks) = hashless(raw) {
            if toks.first() == Some(&"Rank") {
                ranks += 1;
                if let Some(h) = toks
                    .iter()
                    .position(|t| *t == "on")
                    .and_then(|k| toks.get(k + 1))
                {
                    if !hosts.contains(h) {
                        hosts.push(h);
                    }
                }
            } else if toks.contains(&"size") && toks.contains(&"time") && toks.contains(&"busbw") {
                header = Some(toks);
            }
            continue;
        }
        let toks: Vec<&str> = raw.split_whitespace().collect();
        if toks.is_empty() || toks[0].parse::<u64>().is_err() {
            continue;
        }
        let h = header.as_ref().ok_or_else(|| {
            perr_at(
                file,
                line,
                None,
                "a data row before the `#  size  count  type … time  algbw  busbw` header",
            )
        })?;
        points.extend(row(h, &toks, file, line)?);
    }
    let at1 = |m: &str| perr_at(file, 1, None, m);
    if header.is_none() {
        return Err(at1(
            "no nccl-tests table: no `#  size  count  type … time  algbw  busbw` header line",
        ));
    }
    if hosts.is_empty() || ranks < 2 {
        return Err(at1("no `#  Rank N Group G Pid P on HOST device D` lines for two or more ranks: cannot tell the GPUs and nodes the test spans (keep nccl-tests' header)"));
    }
    let sizes = {
        let mut s: Vec<u64> = points.iter().map(|p| p.size_bytes as u64).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    if sizes < 2 {
        return Err(at1("fewer than two message sizes with a time: an α–β fit needs a range of sizes (nccl-tests -b 8 -e 8G -f 2)"));
    }
    Ok(NcclLog {
        file: file.to_string(),
        kind,
        ranks,
        nodes: hosts.len() as u64,
        points,
    })
}

/// The measurements of one data row: the out-of-place block and the
/// in-place block (`N/A` blocks skipped).
fn row(h: &[&str], toks: &[&str], file: &str, line: usize) -> Result<Vec<NcclPoint>> {
    let bad = |f: &str, m: String| perr_at(file, line, Some(f), m);
    if toks.len() != h.len() {
        return Err(perr_at(
            file,
            line,
            None,
            format!(
                "{} columns, the header has {} ({})",
                toks.len(),
                h.len(),
                h.join(" ")
            ),
        ));
    }
    let num = |k: usize| -> Option<f64> {
        toks[k]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let size = num(0).ok_or_else(|| bad("size", format!("bad size `{}`", toks[0])))?;
    let times: Vec<usize> = (0..h.len()).filter(|&k| h[k] == "time").collect();
    let mut out = Vec::new();
    for (block, &k) in times.iter().enumerate() {
        if toks[k] == "N/A" {
            continue;
        }
        let t = num(k).ok_or_else(|| bad("time", format!("bad time `{}` (µs)", toks[k])))?;
        let busbw_k = (k..h.len()).find(|&j| h[j] == "busbw");
        let busbw = busbw_k.and_then(num).unwrap_or(0.0);
        if size > 0.0 && t > 0.0 {
            out.push(NcclPoint {
                line,
                size_bytes: size,
                time_s: t * 1e-6,
                busbw_gbs: busbw,
                in_place: block == 1,
            });
        }
    }
    Ok(out)
}

/// The α–β fit of one log.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclFit {
    /// File name.
    pub file: String,
    /// Collective.
    pub kind: Collective,
    /// Ranks and nodes.
    pub ranks: u64,
    /// Nodes.
    pub nodes: u64,
    /// Measurements fitted.
    pub points: usize,
    /// α: fixed time per collective, seconds.
    pub alpha_s: f64,
    /// α per ring step, `α/(n − 1)` (the pricer's latency per step).
    pub latency_per_step_s: f64,
    /// β: bus bandwidth, bytes/s.
    pub busbw_bytes_per_s: f64,
    /// Largest busbw the log reports, GB/s.
    pub max_reported_busbw_gbs: f64,
    /// Root-mean-square relative residual of the time.
    pub rms_rel_residual: f64,
}

/// Fit `t = α + B/β` (B = bus bytes) by least squares of the relative
/// error `(α + B/β)/t − 1`, so that small messages set α and large ones β;
/// α is held at 0 if the unconstrained fit makes it negative.
pub fn fit(log: &NcclLog) -> Result<NcclFit> {
    let f = log.bus_factor();
    let (mut suu, mut suv, mut svv, mut su, mut sv) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in &log.points {
        let (u, v) = (1.0 / p.time_s, f * p.size_bytes / p.time_s);
        suu += u * u;
        suv += u * v;
        svv += v * v;
        su += u;
        sv += v;
    }
    let det = suu * svv - suv * suv;
    let (mut a, mut b) = if det > 0.0 {
        ((su * svv - sv * suv) / det, (suu * sv - suv * su) / det)
    } else {
        (0.0, sv / svv)
    };
    if a < 0.0 {
        a = 0.0;
        b = sv / svv;
    }
    if !(b > 0.0 && b.is_finite()) {
        return Err(perr_at(
            &log.file,
            log.points.first().map_or(1, |p| p.line),
            None,
            "the times do not grow with the message size: no bandwidth to fit",
        ));
    }
    let n = log.points.len() as f64;
    let rms = (log
        .points
        .iter()
        .map(|p| ((a + b * f * p.size_bytes) / p.time_s - 1.0).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    Ok(NcclFit {
        file: log.file.clone(),
        kind: log.kind,
        ranks: log.ranks,
        nodes: log.nodes,
        points: log.points.len(),
        alpha_s: a,
        latency_per_step_s: a / (log.ranks as f64 - 1.0).max(1.0),
        busbw_bytes_per_s: 1.0 / b,
        max_reported_busbw_gbs: log.points.iter().map(|p| p.busbw_gbs).fold(0.0, f64::max),
        rms_rel_residual: rms,
    })
}
