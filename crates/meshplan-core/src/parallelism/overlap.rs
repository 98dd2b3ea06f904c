//! How a run overlaps its communication with compute: the per-run settings
//! of the step-time model (`[training] tp_overlap`, `dp_overlap`,
//! `sp_allgather`), as Calculon and llm-analysis let users choose them.
//! Their effect on the step time is in `step::calibrated` (`docs/fidelity.md`);
//! the defaults are the settings every efficiency profile was fitted with.

use serde::Serialize;

use super::named_choice;
use crate::error::Result;

named_choice! {
    /// Tensor-parallel communication overlap.
    pub enum TpOverlap {
        /// Nothing hidden: every TP/SP collective on the critical path.
        None,
        /// The profile's fitted fraction hidden (`tp_overlap`): what the
        /// profiles were fitted with.
        #[default]
        Ring,
        /// Transformer Engine userbuffers (Megatron `--tp-comm-overlap`,
        /// needs sequence parallelism): each all-gather / reduce-scatter split
        /// into tp ring-exchange chunks pipelined with the GEMM chunks, so only
        /// one chunk and what exceeds the GEMMs are exposed.
        Pipelined,
    }
}

named_choice! {
    /// Data-parallel communication overlap.
    pub enum DpOverlap {
        /// Bucketed overlap with the backward (the profile's `dp_overlap`;
        /// ZeRO-2/3 reductions and gathers under the next micro-batch): what
        /// the profiles were fitted with.
        #[default]
        On,
        /// Gradient reduce-scatter / all-reduce and parameter all-gather
        /// after the backward, fully exposed.
        Off,
    }
}

named_choice! {
    /// The sequence-parallel all-gather of a column-parallel GEMM's input in
    /// the backward (its weight gradient needs the gathered input).
    pub enum SpAllGather {
        /// The gathered input is kept from the forward: no collective in the
        /// backward beyond the 4 the step-time model was fitted with.
        #[default]
        Keep,
        /// Only the sequence shard is kept and the all-gather is redone in the
        /// backward (Korthikanti et al. 2022 §4.2.2, Megatron's SP): one more
        /// all-gather per column-parallel block (QKV, MLP up), 2 per layer.
        Redo,
    }
}

/// The three settings (`config.overlap` in `meshplan train --json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Overlap {
    /// TP/SP collectives.
    pub tp: TpOverlap,
    /// Data-parallel (and ZeRO / FSDP) collectives.
    pub dp: DpOverlap,
    /// The SP all-gather in the backward.
    pub sp_allgather: SpAllGather,
}

impl Overlap {
    /// The settings from their `[training]` keys (absent: the default).
    pub fn parse(tp: Option<&str>, dp: Option<&str>, sp: Option<&str>) -> Result<Overlap> {
        let d = Overlap::default();
        Ok(Overlap {
            tp: tp.map_or(Ok(d.tp), |s| super::parse_choice("tp_overlap", s))?,
            dp: dp.map_or(Ok(d.dp), |s| super::parse_choice("dp_overlap", s))?,
            sp_allgather: sp.map_or(Ok(d.sp_allgather), |s| {
                super::parse_choice("sp_allgather", s)
            })?,
        })
    }

    /// Every setting that differs from the one the profiles were fitted
    /// with (the defaults): (the `[training]` key, the value, the fitted value).
    pub fn unfitted(&self) -> Vec<(&'static str, &'static str, &'static str)> {
        let d = Overlap::default();
        let mut out = Vec::new();
        if self.tp != d.tp {
            out.push(("tp overlap", self.tp.into(), d.tp.into()));
        }
        if self.dp != d.dp {
            out.push(("dp overlap", self.dp.into(), d.dp.into()));
        }
        if self.sp_allgather != d.sp_allgather {
            out.push((
                "sp all-gather",
                self.sp_allgather.into(),
                d.sp_allgather.into(),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_refuses_others() {
        let o = Overlap::parse(Some("Pipelined"), Some("off"), Some("redo")).unwrap();
        assert_eq!(o.tp, TpOverlap::Pipelined);
        assert_eq!(o.dp, DpOverlap::Off);
        assert_eq!(o.sp_allgather, SpAllGather::Redo);
        assert_eq!(o.unfitted().len(), 3);
        assert_eq!(
            Overlap::parse(None, None, None).unwrap(),
            Overlap::default()
        );
        assert!(Overlap::default().unfitted().is_empty());
        let e = Overlap::parse(Some("full"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tp_overlap") && e.contains("none, ring, pipelined"),
            "{e}"
        );
    }
}
