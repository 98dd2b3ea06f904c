//! The step-time cost of offloading (`memory::offload` moves the bytes):
//! the host-link traffic each offloaded part needs per step, and the part
//! of it compute does not hide.
//!
//! The host link is full duplex (PCIe, NVLink-C2C): host→device (H2D) and
//! device→host (D2H) copies run at `W_host` each, concurrently, on copy
//! engines beside the kernels. A step has three windows:
//!
//! * forward (`T_f`, the forward FLOPs' share of `T_math`): H2D of the
//!   weights (`W·m`, weight offload), D2H of the saved activations
//!   (`A_mb·m`, activation offload);
//! * backward (`T_b = T_math − T_f`): H2D of the weights again and of the
//!   activations, D2H of the gradients (`P_opt·bytes_g`, optimizer offload);
//! * the optimizer step, which nothing hides: the CPU step (optimizer
//!   offload) and the copies after it — the updated weights H2D
//!   (`P_opt·bytes_p`; none when the weights live on the host) or, with
//!   weight offload and the optimizer on the GPU, the updated weights D2H.
//!
//! Exposed = `max(0, max(H2D_f, D2H_f)/W_host − T_f) + max(0, max(H2D_b,
//! D2H_b)/W_host − T_b) + T_cpu + max(H2D_t, D2H_t)/W_host`.
//!
//! The CPU step is bound by the host's memory bandwidth: per parameter it
//! reads the fp32 gradient and master weight and the moments and writes the
//! master, the moments and the 16-bit copy sent back (`12 + 2·k·bytes_opt +
//! bytes_p` bytes; Adam fp32: 30 B), at the host DRAM bandwidth share of
//! one chip (`[host] memory_bandwidth_per_chip`). DeepSpeed's vectorised
//! CPU-Adam is "5X–7X faster than the standard PyTorch implementation"
//! (deepspeed.ai/tutorials/zero-offload), i.e. near this bound; no measured
//! step with offload is in the validation data, so every prediction with
//! offload is outside the fitted range.

use serde::Serialize;

use crate::hardware::Chip;
use crate::memory::offload::Offloaded;
use crate::memory::MemoryQuery;
use crate::parallelism::Offload;
use crate::trace::{Step, Tracer};

/// Host-link traffic and exposed time of one step with offloading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct OffloadTime {
    /// What is offloaded.
    pub parts: Offload,
    /// W_host: the host link, one direction, per chip (B/s).
    pub link_bytes_per_s: f64,
    /// Host→device bytes in the forward, backward and after the step.
    pub h2d_bytes: [f64; 3],
    /// Device→host bytes in the forward, backward and after the step.
    pub d2h_bytes: [f64; 3],
    /// Compute the copies can hide under: (forward, backward) seconds.
    pub overlappable_s: [f64; 2],
    /// The CPU optimizer step (s).
    pub cpu_step_s: f64,
    /// Seconds added to the step.
    pub exposed_s: f64,
    /// Host DRAM the device's offloaded state takes (B).
    pub host_bytes: f64,
    /// Host DRAM per chip the catalog gives (B).
    pub host_capacity_bytes: f64,
}

/// Why `chip` cannot take offloaded state (no host link or host memory
/// figure in its catalog entry), if it cannot.
pub fn unsupported(chip: &Chip) -> Option<String> {
    if chip.pcie.is_none() || chip.host_memory.is_none() {
        Some(format!(
            "offload needs the host link and host memory of {} ([host] pcie_bandwidth_one_way, memory_per_chip, memory_bandwidth_per_chip in its catalog entry)",
            chip.name
        ))
    } else {
        None
    }
}

/// The traffic and exposed time of `off` on `chip`. `t_math` is the step's
/// compute, `fwd_share` the forward's share of its FLOPs, `m` micro-batches;
/// `bytes_g`, `bytes_p` the gradient and weight bytes per parameter.
#[allow(clippy::too_many_arguments)]
pub fn time<T: Tracer>(
    chip: &Chip,
    q: &MemoryQuery,
    off: &Offloaded,
    bytes_g: f64,
    t_math: f64,
    fwd_share: f64,
    m: u64,
    tr: &mut T,
) -> OffloadTime {
    let o = q.offload;
    let (Some(link), Some(host)) = (chip.pcie, chip.host_memory.as_ref()) else {
        return OffloadTime {
            parts: o,
            ..OffloadTime::default()
        };
    };
    let w = link.one_way_rate().get();
    let m = m.max(1) as f64;
    let pb = q.param_dtype.bytes_per_element();
    let wb = off.weights_bytes.get();
    let act = off.activations_per_microbatch_bytes.get() * m;
    let p_opt = off.optimizer_params;
    let on = |b: bool, x: f64| if b { x } else { 0.0 };
    let h2d = [
        on(o.weights, wb * m),
        on(o.weights, wb * m) + on(o.activations, act),
        on(o.optimizer && !o.weights, p_opt * pb),
    ];
    let d2h = [
        on(o.activations, act),
        on(o.optimizer, p_opt * bytes_g),
        on(o.weights && !o.optimizer, wb),
    ];
    let k = q.optimizer.moments(1, 1).min(2.0);
    let cpu_bytes = 12.0 + 2.0 * k * q.optimizer_dtype.bytes_per_element() + pb;
    let cpu_step_s = on(o.optimizer, p_opt * cpu_bytes / host.bandwidth.get());
    let t_f = t_math * fwd_share.clamp(0.0, 1.0);
    let overlappable_s = [t_f, t_math - t_f];
    let window = |i: usize| (h2d[i].max(d2h[i]) / w - overlappable_s[i]).max(0.0);
    let exposed_s = window(0) + window(1) + cpu_step_s + h2d[2].max(d2h[2]) / w;
    tr.record(|| {
        Step::new(
            "train.offload.time",
            "Exposed host-link time",
            "max(0, max(H2D_f, D2H_f)/W_host − T_f) + max(0, max(H2D_b, D2H_b)/W_host − T_b) + P_opt·bytes_cpu/W_dram + max(H2D_t, D2H_t)/W_host",
        )
        .bind("W_host", w, "B/s")
        .bind("H2D_f", h2d[0], "B")
        .bind("D2H_f", d2h[0], "B")
        .bind("T_f", overlappable_s[0], "s")
        .bind("H2D_b", h2d[1], "B")
        .bind("D2H_b", d2h[1], "B")
        .bind("T_b", overlappable_s[1], "s")
        .bind("P_opt", p_opt, "params")
        .bind("bytes_cpu", cpu_bytes, "B")
        .bind("W_dram", host.bandwidth.get(), "B/s")
        .bind("H2D_t", h2d[2], "B")
        .bind("D2H_t", d2h[2], "B")
        .result(exposed_s, "s")
        .source("ZeRO-Offload (Ren et al. 2021); ZeRO-Infinity (Rajbhandari et al. 2021); docs/training.md (offload)")
    });
    OffloadTime {
        parts: o,
        link_bytes_per_s: w,
        h2d_bytes: h2d,
        d2h_bytes: d2h,
        overlappable_s,
        cpu_step_s,
        exposed_s,
        host_bytes: off.host_bytes.get(),
        host_capacity_bytes: host.capacity.get(),
    }
}

/// The report's offload rows: host memory against the host's capacity, the
/// traffic per window and the exposed time.
pub fn fields(o: &OffloadTime) -> Vec<(String, String)> {
    use crate::units::{fmt_si, Bytes, Seconds};
    use crate::view::field;
    let gb = |b: f64| Bytes::new(b).both();
    vec![
        field(
            &format!("host memory per device (offload: {})", o.parts),
            "",
        ),
        field(
            "  host bytes",
            format!(
                "{} of {} per chip: {}",
                gb(o.host_bytes),
                gb(o.host_capacity_bytes),
                if o.host_bytes <= o.host_capacity_bytes {
                    "fits"
                } else {
                    "does NOT fit"
                }
            ),
        ),
        field("  host link (one way)", fmt_si(o.link_bytes_per_s, "B/s")),
        field(
            "  forward H2D / D2H",
            format!(
                "{} / {} under {}",
                gb(o.h2d_bytes[0]),
                gb(o.d2h_bytes[0]),
                Seconds::new(o.overlappable_s[0])
            ),
        ),
        field(
            "  backward H2D / D2H",
            format!(
                "{} / {} under {}",
                gb(o.h2d_bytes[1]),
                gb(o.d2h_bytes[1]),
                Seconds::new(o.overlappable_s[1])
            ),
        ),
        field(
            "  after the step H2D / D2H",
            format!("{} / {}", gb(o.h2d_bytes[2]), gb(o.d2h_bytes[2])),
        ),
        field("  CPU optimizer step", Seconds::new(o.cpu_step_s)),
        field("  exposed (added to the step)", Seconds::new(o.exposed_s)),
    ]
}

/// A calibrated step time `total` (floored at the roofline without the
/// offload) with offload `o`: the GPU optimizer update (`gpu_optimizer`
/// seconds of it) leaves when the CPU runs the optimizer, the exposed
/// host-link and CPU time joins. The planner and the report both use it.
/// Never below `floor`, the roofline lower bound with the offload.
pub fn predicted_step(total: f64, gpu_optimizer: f64, o: &OffloadTime, floor: f64) -> f64 {
    let opt = if o.parts.optimizer {
        gpu_optimizer
    } else {
        0.0
    };
    ((total - opt).max(0.0) + o.exposed_s).max(floor)
}
