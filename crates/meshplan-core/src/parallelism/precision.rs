//! FP8 training recipes: how the inputs of an fp8 GEMM are scaled, which
//! sets the cast traffic each GEMM input pays and which GEMM kernel runs.
//! Master weights, gradients and optimizer state keep their dtypes under
//! every recipe (Transformer Engine and DeepSeek-V3 keep fp32 master
//! weights and optimizer moments; only the GEMM operands are fp8).

super::named_choice! {
    /// The scaling recipe of fp8 GEMMs (Transformer Engine `recipe.*`;
    /// DeepSeek-V3 technical report §3.3).
    pub enum Fp8Recipe {
        /// Per-tensor scales from the amax history of earlier iterations
        /// (TE `DelayedScaling`): the cast needs no pass over the tensor
        /// before it — the amax of this iteration is taken while casting.
        #[default]
        Delayed,
        /// Per-tensor scales from the tensor's own amax (TE
        /// `Float8CurrentScaling`): one extra read of the bf16 tensor to
        /// find its amax before the cast.
        Current,
        /// DeepSeek-style fine-grained scales (TE `Float8BlockScaling`):
        /// 1×128 tiles for activations and gradients, 128×128 blocks for
        /// weights, one fp32 scale each; the GEMM promotes partial sums to
        /// fp32 every 128 (the `fp8_block` GEMM kernels).
        #[strum(to_string = "blockwise", serialize = "block", serialize = "deepseek")]
        #[serde(rename = "blockwise", alias = "block")]
        Blockwise,
    }
}

impl Fp8Recipe {
    /// Parse "delayed", "current", "blockwise" ("block", "deepseek").
    pub fn parse(s: &str) -> crate::error::Result<Self> {
        super::parse_choice("fp8 recipe", s)
    }

    /// HBM bytes per element of one GEMM input's cast to fp8 (element-wise
    /// traffic; every GEMM input forward and output gradient backward):
    ///
    /// * delayed: read bf16 (2) + write the fp8 copy (1) + its transpose for
    ///   the other GEMM of the backward (1) = 4 (TE `cast_transpose` with
    ///   the amax fused);
    /// * current: the same plus one read of the bf16 tensor for its amax
    ///   before the cast (2) = 6;
    /// * blockwise: read bf16 (2) + write the 1×128-scaled fp8 copy (1) and
    ///   the one scaled along the other axis (1: a 1×128 tile of the
    ///   transpose has other scales, so both come from the bf16 tile in
    ///   one pass) + one fp32 scale per 128 elements for each (2·4/128) =
    ///   4.0625.
    pub fn cast_bytes_per_element(self) -> f64 {
        match self {
            Fp8Recipe::Delayed => 4.0,
            Fp8Recipe::Current => 6.0,
            Fp8Recipe::Blockwise => 4.0 + 2.0 * 4.0 / 128.0,
        }
    }

    /// HBM bytes per parameter of the weights' cast, once per step (the
    /// fp8 copy made at the first micro-batch serves the others): read the
    /// bf16 weight (2) and write the fp8 copy and its transpose (1 + 1) = 4
    /// (delayed); current scaling reads the weight once more for its amax
    /// (+2) = 6; blockwise scales 128×128 blocks, whose transpose keeps the
    /// block's scale (DeepSeek-V3 §3.3.2): 4 + two fp32 scales per 16,384
    /// elements.
    pub fn weight_cast_bytes_per_param(self) -> f64 {
        match self {
            Fp8Recipe::Delayed => 4.0,
            Fp8Recipe::Current => 6.0,
            Fp8Recipe::Blockwise => 4.0 + 2.0 * 4.0 / (128.0 * 128.0),
        }
    }

    /// The chip profile's GEMM curve (`[[curves.gemm]] dtype`) of the
    /// recipe's kernels: per-tensor scaled fp8 GEMMs (`fp8`) or the
    /// block-scaled ones (`fp8_block`).
    pub fn gemm_curve(self) -> &'static str {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Current => "fp8",
            Fp8Recipe::Blockwise => "fp8_block",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_parse_and_price_their_casts() {
        assert_eq!(Fp8Recipe::parse("DeepSeek").unwrap(), Fp8Recipe::Blockwise);
        assert_eq!(Fp8Recipe::Blockwise.to_string(), "blockwise");
        // current scaling reads the tensor once more than delayed: +2 B
        assert_eq!(
            Fp8Recipe::Current.cast_bytes_per_element()
                - Fp8Recipe::Delayed.cast_bytes_per_element(),
            2.0
        );
        // blockwise: two fp32 scales per 128 elements = 1/16 B per element
        assert_eq!(
            Fp8Recipe::Blockwise.cast_bytes_per_element(),
            4.0 + 1.0 / 16.0
        );
        let e = Fp8Recipe::parse("tensorwise").unwrap_err().to_string();
        assert!(e.contains("blockwise"), "{e}");
    }
}
