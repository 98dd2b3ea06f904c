//! "What would change it" for a framework plan: the single changes a
//! practitioner tries before asking for more chips — the framework's
//! micro-batch count, recompute, the distributed optimizer, sequence
//! parallelism — each re-analysed with the same [`super::analyze_with`]
//! (peak memory, bubble, MFU), never estimated.
//!
//! The book's accounting keeps the memory model's own list
//! ([`crate::memory::verdict::verdict`]) so the book's figures and reports
//! are unchanged.

use super::scenario::{framework_micro_batching, TrainSetup};
use super::TrainReport;
use crate::memory::FitLevel;
use crate::parallelism::{Remat, TrainConfig};
use crate::trace::NoTrace;

/// A pipeline bubble above this fraction is worth a "would change it" line
/// even when the plan fits (the 42.9 % bubble at m = pp).
pub const SLOW_BUBBLE_FRACTION: f64 = 0.15;

/// Replace `r`'s "would change it" list with the re-analysed alternatives
/// of [`alternatives`], then the memory model's last line (the device that
/// would hold the peak, or the margin), for a framework plan that does not
/// fit, is tight, or spends more than [`SLOW_BUBBLE_FRACTION`] in the bubble.
pub fn attach(s: &TrainSetup, r: &mut TrainReport) {
    if !s.cfg.framework.is_framework() || !r.feasible {
        return;
    }
    let fits = r.memory_verdict.level == FitLevel::Fits;
    if fits && r.bubble_fraction <= SLOW_BUBBLE_FRACTION {
        return;
    }
    let mut lines: Vec<String> = alternatives(&s.cfg, fits)
        .into_iter()
        .filter_map(|(what, cfg)| line(s, r, &what, &cfg))
        .collect();
    if !fits {
        // the memory model's last line: the device size, or the margin
        lines.extend(r.memory_verdict.would_change.last().cloned());
    }
    r.memory_verdict.would_change = lines;
}

/// The single changes to try, in the order a practitioner would: the
/// framework's micro-batch count, then (only when memory is the problem)
/// lighter recompute policies, ZeRO-1 and sequence parallelism.
pub fn alternatives(cfg: &TrainConfig, fits: bool) -> Vec<(String, TrainConfig)> {
    let mut alts = Vec::new();
    if let Some((mbs, m)) = framework_micro_batching(cfg).filter(|&(_, m)| m > cfg.microbatches) {
        let seqs = if mbs == 1 {
            "one sequence".to_string()
        } else {
            format!("{mbs} sequences")
        };
        alts.push((
            format!("{m} micro-batches of {seqs} (--microbatches {m})"),
            TrainConfig {
                microbatches: m,
                ..*cfg
            },
        ));
    }
    if fits {
        return alts;
    }
    for (remat, flag) in [(Remat::Selective, "selective"), (Remat::Full, "full")] {
        if cfg.remat != remat {
            alts.push((
                format!("{flag} recompute (--remat {flag})"),
                TrainConfig { remat, ..*cfg },
            ));
        }
    }
    let d = cfg.degrees.at_least_one();
    if cfg.zero == 0 && d.dp * d.cp > 1 {
        alts.push((
            "distributed optimizer (--zero 1)".to_string(),
            TrainConfig { zero: 1, ..*cfg },
        ));
    }
    if d.tp > 1 && !cfg.sequence_parallel {
        alts.push((
            "sequence parallelism (--sequence-parallel)".to_string(),
            TrainConfig {
                sequence_parallel: true,
                ..*cfg
            },
        ));
    }
    alts
}

/// One alternative's line: its peak, fit, bubble and MFU (predicted where
/// the chip has a profile, the roofline's otherwise); `None` when it helps
/// neither memory nor the bubble, or cannot run.
fn line(s: &TrainSetup, now: &TrainReport, what: &str, cfg: &TrainConfig) -> Option<String> {
    let a = s.analyze_cfg(cfg, &mut NoTrace);
    let peak = a.memory_per_device.total_bytes.get();
    let better_memory = peak < now.memory_per_device.total_bytes.get();
    let better_bubble = a.bubble_fraction < now.bubble_fraction;
    if !a.feasible || !(better_memory || better_bubble) {
        return None;
    }
    let mfu = match &a.predicted {
        Some(p) => format!("MFU predicted {:.1} %", 100.0 * p.mfu),
        None => format!("MFU at the roofline {:.1} %", 100.0 * a.mfu_at_lower_bound),
    };
    Some(format!(
        "{what}: peak {:.1} GB ({}), bubble {:.1} %, {mfu}",
        peak / 1e9,
        if a.fits { "fits" } else { "still over" },
        100.0 * a.bubble_fraction
    ))
}
