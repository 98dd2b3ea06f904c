//! Logical parallelism axes and their degrees.

use serde::{Deserialize, Serialize};

use super::named_choice;

/// Logical parallelism axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogicalAxis {
    /// Data parallel (replicated weights).
    Dp,
    /// Data parallel over DCN between TPU slices.
    DpDcn,
    /// Fully sharded data parallel (ZeRO-3).
    Fsdp,
    /// Tensor (Megatron) parallel.
    Tp,
    /// Pipeline stages.
    Pp,
    /// Context (sequence) parallel.
    Cp,
    /// Expert parallel.
    Ep,
}

impl LogicalAxis {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            LogicalAxis::Dp => "dp",
            LogicalAxis::DpDcn => "dp-dcn",
            LogicalAxis::Fsdp => "fsdp",
            LogicalAxis::Tp => "tp",
            LogicalAxis::Pp => "pp",
            LogicalAxis::Cp => "cp",
            LogicalAxis::Ep => "ep",
        }
    }
    /// Placement order, innermost first.
    pub const ORDER: [LogicalAxis; 6] = [
        LogicalAxis::Tp,
        LogicalAxis::Cp,
        LogicalAxis::Ep,
        LogicalAxis::Fsdp,
        LogicalAxis::Dp,
        LogicalAxis::Pp,
    ];
    /// Every axis, in the order a step's collectives are listed.
    pub const ALL: [LogicalAxis; 7] = [
        LogicalAxis::Fsdp,
        LogicalAxis::Dp,
        LogicalAxis::DpDcn,
        LogicalAxis::Cp,
        LogicalAxis::Tp,
        LogicalAxis::Ep,
        LogicalAxis::Pp,
    ];
    /// Index in [`LogicalAxis::ALL`].
    pub const fn index(self) -> usize {
        match self {
            LogicalAxis::Fsdp => 0,
            LogicalAxis::Dp => 1,
            LogicalAxis::DpDcn => 2,
            LogicalAxis::Cp => 3,
            LogicalAxis::Tp => 4,
            LogicalAxis::Ep => 5,
            LogicalAxis::Pp => 6,
        }
    }
}

impl std::fmt::Display for LogicalAxis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parallel degrees (1 = unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Degrees {
    /// Data parallel.
    pub dp: u64,
    /// FSDP.
    pub fsdp: u64,
    /// Tensor parallel.
    pub tp: u64,
    /// Pipeline.
    pub pp: u64,
    /// Context parallel.
    pub cp: u64,
    /// Expert parallel (a sub-grouping of dp·fsdp·cp, see [`Degrees::product`]).
    pub ep: u64,
    /// Expert tensor parallel: the TP degree inside each expert (Megatron-Core
    /// `expert_tensor_parallel_size`); 0 = the same as `tp` (Megatron's
    /// default). See [`Degrees::expert_tp`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub etp: u64,
    /// How GPU ranks are laid out: which axes share the NVLink domain.
    #[serde(default, skip_serializing_if = "RankOrder::is_default")]
    pub order: RankOrder,
}

/// serde's `skip_serializing_if` for degrees where 0 means "unset".
pub(crate) fn is_zero(x: &u64) -> bool {
    *x == 0
}

named_choice! {
    /// The order GPU ranks are laid out in, innermost (the NVLink domain)
    /// first: which axes ride the scale-up network and which cross nodes.
    /// TPU slices place axes on torus dimensions instead
    /// (`mesh::place_torus`).
    pub enum RankOrder {
        /// tp, cp, ep, fsdp, dp, pp — Megatron-LM's default rank order
        /// (`tp-cp-ep-dp-pp`): pipeline stages leave the node first.
        #[default]
        #[strum(serialize = "tp-cp-ep-dp-pp")]
        #[serde(rename = "tp-cp-ep-dp-pp")]
        PipelineOuter,
        /// tp, pp, cp, ep, fsdp, dp — Megatron-LM's `--use-tp-pp-dp-mapping`:
        /// pipeline neighbours share the node, the data axes cross nodes.
        #[strum(serialize = "tp-pp-dp")]
        #[serde(rename = "tp-pp-dp")]
        PipelineInner,
    }
}

impl RankOrder {
    /// Both orders, the default first.
    pub const ALL: [RankOrder; 2] = [RankOrder::PipelineOuter, RankOrder::PipelineInner];
    /// The axes, innermost first.
    pub const fn axes(self) -> [LogicalAxis; 6] {
        use LogicalAxis::{Cp, Dp, Ep, Fsdp, Pp, Tp};
        match self {
            RankOrder::PipelineOuter => LogicalAxis::ORDER,
            RankOrder::PipelineInner => [Tp, Pp, Cp, Ep, Fsdp, Dp],
        }
    }
    /// Its name in flags and JSON.
    pub fn name(self) -> &'static str {
        self.into()
    }
    /// Whether this is Megatron's default order.
    pub fn is_default(&self) -> bool {
        *self == RankOrder::PipelineOuter
    }
    /// Parse a flag or scenario value ("tp-cp-ep-dp-pp", "tp-pp-dp").
    pub fn parse(s: &str) -> crate::error::Result<RankOrder> {
        super::parse_choice("rank_order", s)
    }
}

impl Default for Degrees {
    fn default() -> Self {
        Degrees {
            dp: 1,
            fsdp: 1,
            tp: 1,
            pp: 1,
            cp: 1,
            ep: 1,
            etp: 0,
            order: RankOrder::PipelineOuter,
        }
    }
}

impl Degrees {
    /// The degrees `[dp, fsdp, tp, pp, cp]` of one factorization of the chip
    /// count (as `planner::factorizations` lists them), without expert
    /// parallelism.
    pub const fn from_factors([dp, fsdp, tp, pp, cp]: [u64; 5]) -> Degrees {
        Degrees {
            dp,
            fsdp,
            tp,
            pp,
            cp,
            ep: 1,
            etp: 0,
            order: RankOrder::PipelineOuter,
        }
    }
    /// The TP degree inside each expert: `etp`, or `tp` when unset.
    /// Megatron-Core forms the expert groups from the same ranks as the
    /// dense ones, ordered `etp-ep-edp-pp` (etp innermost): with etp = tp
    /// the ep group folds into dp·fsdp·cp beside tp (today's layout); with
    /// etp = 1 each expert is whole on one rank and the ep group takes the
    /// innermost ranks, tp's included.
    pub fn expert_tp(&self) -> u64 {
        if self.etp == 0 {
            self.tp
        } else {
            self.etp
        }
    }
    /// Whether experts use a TP degree of their own (etp set and ≠ tp).
    pub fn etp_differs(&self) -> bool {
        self.etp != 0 && self.etp != self.tp
    }
    /// Devices used: dp·fsdp·tp·pp·cp. Expert parallelism reuses the
    /// data-like axes (as in Megatron/DeepSpeed-MoE) and so does not multiply.
    /// Saturates at `u64::MAX` (use [`Degrees::checked_product`] to reject).
    pub fn product(&self) -> u64 {
        self.checked_product().unwrap_or(u64::MAX)
    }
    /// dp·fsdp·tp·pp·cp, `None` when it overflows `u64`.
    pub fn checked_product(&self) -> Option<u64> {
        [self.fsdp, self.tp, self.pp, self.cp]
            .iter()
            .try_fold(self.dp, |a, &x| a.checked_mul(x))
    }
    /// Data-like ranks that split the batch: dp·fsdp (saturating).
    pub fn data(&self) -> u64 {
        self.dp.saturating_mul(self.fsdp)
    }
    /// Degree of one axis.
    pub fn get(&self, a: LogicalAxis) -> u64 {
        match a {
            LogicalAxis::Dp | LogicalAxis::DpDcn => self.dp,
            LogicalAxis::Fsdp => self.fsdp,
            LogicalAxis::Tp => self.tp,
            LogicalAxis::Pp => self.pp,
            LogicalAxis::Cp => self.cp,
            LogicalAxis::Ep => self.ep,
        }
    }
    /// The same degrees with every zero raised to 1 (so that no division by a
    /// degree can fail; zero degrees are reported as infeasible separately).
    pub fn at_least_one(&self) -> Degrees {
        Degrees {
            dp: self.dp.max(1),
            fsdp: self.fsdp.max(1),
            tp: self.tp.max(1),
            pp: self.pp.max(1),
            cp: self.cp.max(1),
            ep: self.ep.max(1),
            etp: self.etp,
            order: self.order,
        }
    }
    /// Whether any degree is zero.
    pub fn has_zero(&self) -> bool {
        [self.dp, self.fsdp, self.tp, self.pp, self.cp, self.ep].contains(&0)
    }
}

impl std::fmt::Display for Degrees {
    /// `dp=16 fsdp=1 tp=8 pp=1 cp=1 ep=1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dp={} fsdp={} tp={} pp={} cp={} ep={}",
            self.dp, self.fsdp, self.tp, self.pp, self.cp, self.ep
        )?;
        if self.etp_differs() {
            write!(f, " etp={}", self.etp)?;
        }
        if !self.order.is_default() {
            write!(f, " order={}", self.order.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_product_rejects_overflow() {
        let d = Degrees {
            tp: 1 << 32,
            pp: 1 << 32,
            ..Degrees::default()
        };
        assert_eq!(d.checked_product(), None);
        assert_eq!(d.product(), u64::MAX);
        let ok = Degrees {
            dp: 4,
            tp: 8,
            pp: 2,
            ..Degrees::default()
        };
        assert_eq!(ok.checked_product(), Some(64));
    }

    #[test]
    fn axis_index_matches_all() {
        for (i, a) in LogicalAxis::ALL.iter().enumerate() {
            assert_eq!(a.index(), i);
        }
    }
}
