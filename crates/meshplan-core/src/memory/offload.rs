//! Offloading to the second memory tier (host DRAM): the bytes each
//! offloaded part takes off HBM and puts in host memory, per device. The
//! host-link traffic these parts cost per step, and how much of it compute
//! hides, is `training::offload`.
//!
//! * **optimizer** (ZeRO-Offload, Ren et al. 2021; Megatron
//!   `--optimizer-cpu-offload`): the moments and the fp32 master copy leave
//!   HBM; the host holds them plus an fp32 copy of the gradients of the
//!   device's optimizer shard (`4·P_opt` bytes), which the CPU step reads.
//! * **weights** (ZeRO-Infinity parameter offload, Rajbhandari et al. 2021):
//!   the host holds the device's weights `W`; HBM keeps the layer in use and
//!   the one prefetched, `2·W/L_stage` (under a framework's ZeRO-3, the two
//!   gathered layers it already keeps).
//! * **activations**: the host holds every saved activation; HBM keeps the
//!   layer being written (forward) or read (backward) and the next,
//!   `2·A/(n_flight·L_stage)`.

use serde::Serialize;

use super::{MemoryBreakdown, MemoryQuery};
use crate::model::Arch;
use crate::units::Bytes;

/// What offloading moved on the busiest device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Offloaded {
    /// Host DRAM the device's offloaded state takes.
    pub host_bytes: Bytes,
    /// HBM freed, all parts.
    pub hbm_freed_bytes: Bytes,
    /// Parameters the device's optimizer shard updates (P_opt).
    pub optimizer_params: f64,
    /// The device's weights before offloading (what the forward and the
    /// backward copy in, a layer at a time).
    pub weights_bytes: Bytes,
    /// Saved activations of one micro-batch (written out in the forward,
    /// read back in the backward).
    pub activations_per_microbatch_bytes: Bytes,
}

/// Layers on the busiest stage, at least 1.
fn stage_layers(a: &Arch, pp: u64) -> f64 {
    a.n_layers.div_ceil(pp.max(1)).max(1) as f64
}

/// Move the parts `q.offload` names from HBM to host memory in `m`
/// (totals recomputed); `None` when nothing is offloaded.
pub fn apply(a: &Arch, q: &MemoryQuery, m: &mut MemoryBreakdown) -> Option<Offloaded> {
    let o = q.offload;
    if !o.any() {
        return None;
    }
    let layers = stage_layers(a, q.pp);
    // the optimizer shard: ZeRO ≥ 1 splits it over the replicas too
    let repl = q.repl.max(1) as f64;
    let optimizer_params = m.params_per_device
        * match q.zero {
            z if z >= 3 => 1.0,
            z if z >= 1 => 1.0 / repl,
            _ => 1.0,
        };
    // the device's own weights; a framework's ZeRO-3 adds the two gathered
    // layers (in use, prefetched) on top, which stay the working set
    let bytes_p = super::state_bytes_per_param(q, a, &super::MemoryCalibration::BOOK)[0];
    let own = (m.params_per_device * bytes_p).min(m.params_bytes.get());
    let gathered = m.params_bytes.get() - own;
    let mut off = Offloaded {
        optimizer_params,
        weights_bytes: Bytes::new(own),
        ..Offloaded::default()
    };
    let (mut host, mut freed) = (0.0, 0.0);
    if o.optimizer {
        host += m.optimizer_bytes.get() + 4.0 * optimizer_params;
        freed += m.optimizer_bytes.get();
        m.optimizer_bytes = Bytes::ZERO;
    }
    if o.weights {
        let resident = if gathered > 0.0 {
            gathered
        } else {
            (2.0 * own / layers).min(own)
        };
        host += own;
        freed += m.params_bytes.get() - resident;
        m.params_bytes = Bytes::new(resident);
    }
    let per_mb = m.activations_bytes.get() / q.in_flight.max(1.0);
    off.activations_per_microbatch_bytes = Bytes::new(per_mb);
    if o.activations {
        let act = m.activations_bytes.get();
        let resident = (2.0 * per_mb / layers).min(act);
        host += act;
        freed += act - resident;
        m.activations_bytes = Bytes::new(resident);
    }
    off.host_bytes = Bytes::new(host);
    off.hbm_freed_bytes = Bytes::new(freed);
    m.total_bytes = Bytes::new(m.total_bytes.get() - freed);
    m.params_plus_optimizer_bytes = Bytes::new(m.params_bytes.get() + m.optimizer_bytes.get());
    Some(off)
}
