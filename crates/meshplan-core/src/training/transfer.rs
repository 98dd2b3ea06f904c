//! What a collective of a training step moves ([`Transfer`]), and the memo
//! of collective costs per mesh that the planner's many evaluations share.

use std::cell::RefCell;

use serde::Serialize;
use strum::EnumCount;

use crate::collectives::CollectiveCost;

/// What a collective of the step moves (`Transfer::COUNT` variants, the
/// slots of [`CostMemo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, strum::EnumCount)]
#[serde(rename_all = "kebab-case")]
pub enum Transfer {
    /// FSDP: gather the weights for the forward.
    FsdpGatherFwd,
    /// FSDP: gather the weights for the backward.
    FsdpGatherBwd,
    /// FSDP: reduce-scatter the gradients.
    FsdpReduceGrads,
    /// DP: all-reduce the gradients.
    DpAllReduce,
    /// ZeRO-1/2: reduce-scatter the gradients.
    ZeroReduceGrads,
    /// ZeRO-1/2: gather the updated weights.
    ZeroGatherWeights,
    /// ZeRO-3 over dp: gather the weights (forward).
    Zero3GatherFwd,
    /// ZeRO-3 over dp: gather the weights (backward).
    Zero3GatherBwd,
    /// ZeRO-3 over dp: reduce-scatter the gradients.
    Zero3ReduceGrads,
    /// Data parallelism over DCN: all-reduce the gradients.
    DcnAllReduce,
    /// cp: all-reduce the gradients.
    CpAllReduce,
    /// cp: ring-pass K, V (forward).
    CpKvFwd,
    /// cp: ring-pass K, V (backward).
    CpKvBwd,
    /// cp: ring-reduce dK, dV.
    CpDkv,
    /// tp: all-gather activations (forward).
    TpGatherFwd,
    /// tp: reduce activations (forward).
    TpReduceFwd,
    /// tp: all-gather activations (backward).
    TpGatherBwd,
    /// tp: reduce activations (backward).
    TpReduceBwd,
    /// ep: dispatch + combine (forward).
    EpFwd,
    /// ep: dispatch + combine (backward).
    EpBwd,
    /// pp: send activations (forward).
    PpFwd,
    /// pp: send gradients (backward).
    PpBwd,
}

impl Transfer {
    /// The sentence the report lists (`sp` = Megatron sequence parallelism).
    pub const fn describe(self, sp: bool) -> &'static str {
        match (self, sp) {
            (Transfer::FsdpGatherFwd, _) => "fsdp: gather weights (forward)",
            (Transfer::FsdpGatherBwd, _) => "fsdp: gather weights (backward)",
            (Transfer::FsdpReduceGrads, _) => "fsdp: reduce-scatter gradients",
            (Transfer::DpAllReduce, _) => "dp: all-reduce gradients",
            (Transfer::ZeroReduceGrads, _) => "zero-1/2: reduce-scatter gradients",
            (Transfer::ZeroGatherWeights, _) => "zero-1/2: gather updated weights",
            (Transfer::Zero3GatherFwd, _) => "zero-3 (dp): gather weights (forward)",
            (Transfer::Zero3GatherBwd, _) => "zero-3 (dp): gather weights (backward)",
            (Transfer::Zero3ReduceGrads, _) => "zero-3 (dp): reduce-scatter gradients",
            (Transfer::DcnAllReduce, _) => "dp over DCN: all-reduce gradients",
            (Transfer::CpAllReduce, _) => "cp: all-reduce gradients",
            (Transfer::CpKvFwd, _) => "cp: ring-pass K,V (forward)",
            (Transfer::CpKvBwd, _) => "cp: ring-pass K,V (backward)",
            (Transfer::CpDkv, _) => "cp: ring-reduce dK,dV",
            (Transfer::TpGatherFwd, false) => "tp: all-gather activations (f/g) (forward)",
            (Transfer::TpGatherFwd, true) => "tp+sp: all-gather activations (forward)",
            (Transfer::TpReduceFwd, false) => {
                "tp: reduce activations (all-reduce = RS + AG, counted as RS here) (forward)"
            }
            (Transfer::TpReduceFwd, true) => "tp+sp: reduce-scatter activations (forward)",
            (Transfer::TpGatherBwd, false) => "tp: all-gather activations (f/g) (backward)",
            (Transfer::TpGatherBwd, true) => "tp+sp: all-gather activations (backward)",
            (Transfer::TpReduceBwd, false) => {
                "tp: reduce activations (all-reduce = RS + AG, counted as RS here) (backward)"
            }
            (Transfer::TpReduceBwd, true) => "tp+sp: reduce-scatter activations (backward)",
            (Transfer::EpFwd, _) => "ep: dispatch + combine (forward)",
            (Transfer::EpBwd, _) => "ep: dispatch + combine (backward)",
            (Transfer::PpFwd, _) => "pp: send activations (forward)",
            (Transfer::PpBwd, _) => "pp: send gradients (backward)",
        }
    }
}

/// Costs of the collectives already met on one mesh, by what they move (the
/// planner evaluates many plans per degree tuple, and most collectives move
/// the same bytes in each): slot `what` holds `(bytes bits, cost)`.
#[derive(Clone, Debug)]
pub struct CostMemo(RefCell<[Option<(u64, CollectiveCost)>; Transfer::COUNT]>);

impl Default for CostMemo {
    fn default() -> Self {
        CostMemo(RefCell::new([None; Transfer::COUNT]))
    }
}

impl CostMemo {
    /// The cost of moving `bytes` for `what`, computed once per byte count.
    pub fn get(
        &self,
        what: Transfer,
        bytes: f64,
        compute: impl FnOnce() -> CollectiveCost,
    ) -> CollectiveCost {
        let bits = bytes.to_bits();
        let mut v = self.0.borrow_mut();
        let slot = &mut v[what as usize];
        match slot {
            Some((b, c)) if *b == bits => *c,
            _ => {
                let c = compute();
                *slot = Some((bits, c));
                c
            }
        }
    }
}
