//! The quantities a claim may name, derived from the reports themselves.
//!
//! A claim's `quantity` is a dotted path into a command's JSON report. The
//! paths a command can report are not listed by hand (a list drifts from
//! the report types as fields are added): they are every path of the
//! serialized reports of representative inputs ([`REPRESENTATIVES`], each
//! catalog model and chip), evaluated through [`super::eval::evaluate`], the
//! same core entry point a claim goes through and the CLI command calls.
//! A new report field is therefore checkable with no edit here; a new
//! *optional* section needs a representative that fills it, and the test
//! `every_report_path_is_known` (crates/meshplan-core/tests/check_keys.rs),
//! which walks the reports of every example scenario, says so.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::Value;

use super::eval::{evaluate, Args, Command};
use crate::catalog::Catalog;
use crate::scenario::Scenario;

/// The paths one command reports: every object and leaf path of its
/// representative reports, and the array-valued paths whose elements
/// (`comms.0.seconds`, `notes.1`) are addressable.
#[derive(Clone, Debug, Default)]
pub struct KnownKeys {
    paths: BTreeSet<String>,
    arrays: BTreeSet<String>,
}

impl KnownKeys {
    /// Every path of `report`, added to the set.
    pub fn add_report(&mut self, report: &Value) {
        fn walk(v: &Value, prefix: &str, k: &mut KnownKeys) {
            if !prefix.is_empty() {
                k.paths.insert(prefix.to_string());
            }
            match v {
                Value::Object(m) => {
                    for (key, x) in m {
                        let p = if prefix.is_empty() {
                            key.clone()
                        } else {
                            format!("{prefix}.{key}")
                        };
                        walk(x, &p, k);
                    }
                }
                Value::Array(_) if !prefix.is_empty() => {
                    k.arrays.insert(prefix.to_string());
                }
                _ => {}
            }
        }
        walk(report, "", self);
    }

    /// Whether `key` is a path the command reports: an exact path, or an
    /// element path under an array-valued one.
    pub fn contains(&self, key: &str) -> bool {
        self.paths.contains(key)
            || self.arrays.iter().any(|a| {
                key.strip_prefix(a.as_str())
                    .is_some_and(|r| r.len() > 1 && r.starts_with('.'))
            })
    }

    /// Every exact path, sorted (for "did you mean" suggestions).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(String::as_str)
    }

    /// Number of exact paths.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether no path is known.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// Inputs whose reports fill the optional sections of each command's report:
/// (command, scenario TOML, the claim's `args` as JSON). Every catalog model
/// (`model`) and chip (`hw`) is added to these by [`known_keys`].
pub const REPRESENTATIVES: &[(Command, &str, &str)] = &[
    // a user's chip with a peak for every dtype (no catalog chip has fp4)
    (Command::Hw, EVERY_DTYPE_CHIP, "{}"),
    // calibrated prediction, MFU quote, tokens to train on (time, cost), pipeline
    (Command::Train, LLAMA3_8B_H100, "{}"),
    // offloaded optimizer: the `offload` section and its exposed seconds
    (Command::Train, LLAMA3_8B_H100_OFFLOAD, "{}"),
    // interleaved pipeline with gradient accumulation
    (
        Command::Train,
        LLAMA3_8B_H100,
        r#"{"schedule": "interleaved", "virtual_stages": 2, "pp": 4, "dp": 2}"#,
    ),
    // DualPipe with an fp8 blockwise recipe (issue 25): the schedule's
    // chunk times and the recipe's curve and casts
    (
        Command::Train,
        LLAMA3_8B_H100_FP8,
        r#"{"schedule": "dualpipe"}"#,
    ),
    // 16 sequences over 64-way DP: a framework gives each rank whole
    // sequences, so there is no prediction (and the note says why)
    (
        Command::Train,
        LLAMA3_8B_H100,
        r#"{"batch_tokens": "64Ki", "dp": 64, "tp": 1, "pp": 1, "sequence_parallel": false}"#,
    ),
    // a TPU slice: the smallest slice, the book's FSDP time
    (Command::Train, BOOK_CH5_V5P, "{}"),
    // mixed FSDP + TP on the TPU slice (the book's ch5 Q3)
    (Command::Train, BOOK_CH5_V5P, r#"{"fsdp": 256, "tp": 16}"#),
    // the book's "k checkpoints of [B, D] per layer" (ch6 sizing)
    (
        Command::Train,
        BOOK_CH5_V5P,
        r#"{"checkpoints_per_layer": 4}"#,
    ),
    // a parameter count used as given (the book's "70e9")
    (Command::Model, PARAMS_GIVEN, "{}"),
    // experts: expert parallelism, the MoE factor
    (Command::Train, MIXTRAL_H100, "{}"),
    // experts predicted: the inventory's all-to-all, context parallelism's
    // ring and ZeRO-3's gathers
    (
        Command::Train,
        MIXTRAL_H100,
        r#"{"tp": 8, "dp": 4, "cp": 2, "ep": 4, "zero": 3, "sequence_parallel": true, "microbatches": 4}"#,
    ),
    // production layouts (issue 25): whole experts folded over tp (etp),
    // stated first/last stage layers, all-gather context parallelism
    (Command::Train, LAYOUTS_H100, "{}"),
    // the book's roofline serving on a TPU, 2D weight-stationary sharding
    (Command::Infer, BOOK_CH7_V5E, "{}"),
    (Command::Infer, BOOK_CH7_V5E, r#"{"sharding": "2d-ws"}"#),
    // a MoE served with expert parallelism
    (Command::Infer, BOOK_CH7_MOE_V5E, "{}"),
    // an engine: static batch, continuous batching, Poisson arrivals,
    // speculative decoding with a draft model and a prefix cache, pipeline
    (Command::Infer, LLAMA70B_H100_VLLM, "{}"),
    (
        Command::Infer,
        LLAMA70B_H100_VLLM,
        r#"{"workload": "concurrency=32"}"#,
    ),
    (
        Command::Infer,
        LLAMA70B_H100_VLLM,
        r#"{"workload": "rate=4"}"#,
    ),
    (
        Command::Infer,
        LLAMA70B_H100_VLLM,
        r#"{"workload": "concurrency=32", "speculative": "draft:llama-3.1-8b", "spec_gamma": 4, "spec_acceptance": 0.7, "prefix_cache_hit": 0.5}"#,
    ),
    (
        Command::Infer,
        LLAMA70B_H100_VLLM,
        r#"{"workload": "concurrency=32", "speculative": "ngram", "spec_acceptance": 0.6}"#,
    ),
    (Command::Infer, LLAMA70B_H100_VLLM, r#"{"pp": 2, "tp": 4}"#),
    (Command::Infer, LLAMA70B_V5E_JETSTREAM, "{}"),
    // building blocks: over ICI (TPU) and NVLink / scale-out (GPU)
    (
        Command::Collective,
        V5P,
        r#"{"op": "allgather_X", "array": "bf16[B_X, D_Y]", "dims": "B=1024,D=4096", "mesh": "X=4,Y=4,Z=4"}"#,
    ),
    (
        Command::Collective,
        V5P,
        r#"{"op": "allreduce_Z", "array": "bf16[B_X, D_Y]{U_Z}", "dims": "B=1024,D=4096", "mesh": "X=4,Y=4,Z=4"}"#,
    ),
    (
        Command::Collective,
        H100,
        r#"{"op": "allgather", "array": "1GB", "mesh": "X=2,Y=8", "axes": "XY"}"#,
    ),
    // the collective's optional sections (issue 24): a routed send, a
    // ragged AllToAll, a gather staged from host memory
    (
        Command::Collective,
        V5E,
        r#"{"op": "permute", "array": "16MiB", "mesh": "4x4", "to": "3,3"}"#,
    ),
    (
        Command::Collective,
        H100,
        r#"{"op": "alltoall", "array": "1GB", "mesh": "X=8", "topk": 4}"#,
    ),
    (
        Command::Collective,
        V5E,
        r#"{"op": "gather", "array": "16e9", "mesh": "4x4", "axes": "XY", "from_host": true}"#,
    ),
    (
        Command::Roofline,
        V5E,
        r#"{"what": "bf16[B, D] * int8[D, F] -> bf16[B, F]", "dims": "B=256,D=8192,F=32768"}"#,
    ),
    (
        Command::Roofline,
        V5E,
        r#"{"what": "bf16[B, D] * bf16[D, F] -> bf16[B, F]", "dims": "B=256,D=8192,F=32768", "from": "ici"}"#,
    ),
    (
        Command::Roofline,
        H100,
        r#"{"what": "attention", "dims": "B=1,T=1,S=8192,N=32,K=4,H=128"}"#,
    ),
    (
        Command::Roofline,
        H100,
        r#"{"bytes": "1 GB", "from": "host"}"#,
    ),
    (
        Command::Shard,
        V5P,
        r#"{"what": "A[I_X, J, K]", "dims": "I=64,J=64,K=64", "mesh": "X=4,Y=8,Z=2"}"#,
    ),
    (
        Command::Shard,
        V5P,
        r#"{"what": "A[B_X, D_Y] * W[D_Y, F]", "dims": "B=1024,D=8192,F=32768", "mesh": "X=4,Y=8,Z=4"}"#,
    ),
    (
        Command::Shard,
        V5P,
        r#"{"what": "In[B_X, D] * W[D, F_Y] -> Out[B_X, F_Y]", "dims": "B=32Ki,D=8192,F=32768", "mesh": "X=4,Y=2"}"#,
    ),
    (
        Command::Mfu,
        H100,
        r#"{"model": "37B", "tokens": "14.8T", "chip_hours": "2.79M", "dtype": "fp8"}"#,
    ),
    (
        Command::Mfu,
        LLAMA3_8B_H100,
        r#"{"tokens": "15T", "time": "54 days", "chips": "16384"}"#,
    ),
];

/// LLaMA-3 8B on 64 H100 (examples/train/llama-3-8b-h100-3d.toml), then
/// the extra `[training]` lines of a variant.
macro_rules! llama3_8b_h100 {
    ($extra:literal) => {
        concat!(
            r#"
[model]
name = "llama-3-8b"
[hardware]
chip = "h100"
mesh = "8x8"
[training]
batch_tokens = "4Mi"
seq_len = 8192
remat = "selective"
master_weights = true
mfu = 0.4
train_tokens = "15T"
"#,
            $extra,
            r#"
[parallelism]
dp = 4
tp = 8
pp = 2
zero = 1
schedule = "1f1b"
microbatches = 128
sequence_parallel = true
"#
        )
    };
}

/// LLaMA-3 8B on 64 H100 (examples/train/llama-3-8b-h100-3d.toml).
const LLAMA3_8B_H100: &str = llama3_8b_h100!("");

/// The same run with its optimizer state in host memory.
const LLAMA3_8B_H100_OFFLOAD: &str = llama3_8b_h100!("offload = [\"optimizer\"]\n");

/// The same run in fp8 with DeepSeek-style blockwise scaling.
const LLAMA3_8B_H100_FP8: &str =
    llama3_8b_h100!("compute_dtype = \"fp8\"\nfp8_recipe = \"blockwise\"\n");

/// The book's ch5 LLaMA-2 13B on a TPU v5p 16x16x16.
const BOOK_CH5_V5P: &str = r#"
[model]
name = "book-ch5-llama-2-13b"
[hardware]
chip = "tpu-v5p@book"
mesh = "16x16x16"
[training]
batch_tokens = "3M"
seq_len = "32Ki"
mfu = 0.5
train_tokens = "1T"
"#;

/// Mixtral 8x7B on 64 H100 with expert parallelism.
const MIXTRAL_H100: &str = r#"
[model]
name = "mixtral-8x7b"
[hardware]
chip = "h100"
chips = 64
[training]
batch_tokens = "4Mi"
seq_len = 4096
mfu = 0.3
train_tokens = "1T"
[parallelism]
dp = 8
ep = 8
"#;

/// Mixtral on 128 H100 with the production-layout keys: ep 8 folded over
/// tp's ranks (etp 1: etp·ep = 8 divides tp·dp·cp = 64), 32 layers as
/// 15 | 17 on 2 stages, all-gather context parallelism.
const LAYOUTS_H100: &str = r#"
[model]
name = "mixtral-8x7b"
[hardware]
chip = "h100"
chips = 128
[training]
batch_tokens = "4Mi"
seq_len = 4096
[parallelism]
tp = 8
cp = 2
pp = 2
dp = 4
ep = 8
etp = 1
first_stage_layers = 15
last_stage_layers = 17
cp_comm = "all-gather"
sequence_parallel = true
microbatches = 4
"#;

/// The book's ch7 18B on a TPU v5e 4x4, int8.
const BOOK_CH7_V5E: &str = r#"
[model]
name = "book-ch7-18b"
[hardware]
chip = "tpu-v5e@book"
mesh = "4x4"
[inference]
weights_dtype = "int8"
kv_dtype = "int8"
compute_dtype = "int8"
batch = 7
context = "128k"
prompt_len = 2048
gen_len = 512
mfu = 0.5
"#;

/// The book's ch7 MoE variant on a TPU v5e 8x16.
const BOOK_CH7_MOE_V5E: &str = r#"
[model]
name = "book-ch7-18b-moe"
[hardware]
chip = "tpu-v5e@book"
mesh = "8x16"
[inference]
weights_dtype = "int8"
kv_dtype = "int8"
batch = 16
context = 8192
[parallelism]
tp = 8
ep = 16
"#;

/// Llama-3.1 70B on 8 H100 under vLLM.
const LLAMA70B_H100_VLLM: &str = r#"
[model]
name = "llama-3.1-70b"
[hardware]
chip = "h100"
chips = 8
[parallelism]
tp = 4
[inference]
engine = "vllm"
batch = 32
prompt_len = 1000
gen_len = 500
"#;

/// Llama-3.1 70B on a TPU v5e 4x4 under JetStream.
const LLAMA70B_V5E_JETSTREAM: &str = r#"
[model]
name = "llama-3.1-70b"
[hardware]
chip = "tpu-v5e"
mesh = "4x4"
[inference]
engine = "jetstream"
weights_dtype = "int8"
kv_dtype = "int8"
batch = 32
prompt_len = 1000
gen_len = 500
workload = "concurrency=32"
"#;

/// An inline chip (a user's chip file) with every optional peak.
const EVERY_DTYPE_CHIP: &str = r#"
[hardware.inline]
name = "every-dtype"
kind = "gpu"
vendor = "representative"
source = "a chip with a peak for every dtype"
[hardware.inline.compute]
fp32 = "67 TFLOP/s"
bf16 = "989.5 TFLOP/s"
fp16 = "989.5 TFLOP/s"
fp8 = "1979 TFLOP/s"
int8 = "1979 TFLOP/s"
int4 = "3958 TFLOP/s"
fp4 = "3958 TFLOP/s"
[hardware.inline.memory]
hbm_capacity = "80 GB"
hbm_bandwidth = "3.35 TB/s"
[hardware.inline.nvlink]
bandwidth_per_gpu_one_way = "450 GB/s"
domain_size = 8
"#;

/// LLaMA 3-70B with the book's "70e9 parameters" as given.
const PARAMS_GIVEN: &str = r#"
[model]
name = "llama-3.1-70b"
params_given = "70e9"
"#;

const V5P: &str = "[hardware]\nchip = \"tpu-v5p@book\"\n";
const V5E: &str = "[hardware]\nchip = \"tpu-v5e@book\"\n";
const H100: &str = "[hardware]\nchip = \"h100\"\n";

/// The known paths of `c`'s report (computed once per process).
pub fn known_keys(c: Command) -> &'static KnownKeys {
    static KEYS: OnceLock<Vec<KnownKeys>> = OnceLock::new();
    let all = KEYS.get_or_init(|| Command::ALL.map(derive).to_vec());
    &all[Command::ALL.iter().position(|x| *x == c).unwrap_or(0)]
}

/// The scenarios and args `c`'s keys come from: [`REPRESENTATIVES`], and
/// for `model` / `hw` every catalog model / chip.
pub fn representatives(c: Command) -> Vec<(Scenario, Args)> {
    let cat = Catalog::builtin();
    let mut out: Vec<(String, String)> = match c {
        Command::Model => cat
            .models()
            .iter()
            .map(|m| (format!("[model]\nname = \"{}\"\n", m.name), "{}".into()))
            .collect(),
        Command::Hw => cat
            .chips()
            .iter()
            .map(|ch| (format!("[hardware]\nchip = \"{}\"\n", ch.name), "{}".into()))
            .collect(),
        _ => Vec::new(),
    };
    out.extend(
        REPRESENTATIVES
            .iter()
            .filter(|(k, ..)| *k == c)
            .map(|(_, s, a)| (s.to_string(), a.to_string())),
    );
    out.into_iter()
        .filter_map(|(s, a)| {
            let s = Scenario::parse(&s, "representative").ok()?;
            let a: Args = serde_json::from_str(&a).ok()?;
            Some((s, a))
        })
        .collect()
}

/// `c`'s keys: the paths of the reports of its representatives.
fn derive(c: Command) -> KnownKeys {
    let cat = Catalog::builtin();
    let mut k = KnownKeys::default();
    for (s, a) in representatives(c) {
        if let Ok((report, _)) = evaluate(c, &s, cat, &a, false) {
            k.add_report(&report);
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every representative parses and evaluates: one that silently failed
    /// would drop the keys only it fills.
    #[test]
    fn every_representative_evaluates() {
        let mut bad = Vec::new();
        for (c, s, a) in REPRESENTATIVES {
            let sc = Scenario::parse(s, "representative").expect("scenario parses");
            let args: Args = serde_json::from_str(a).expect("args parse");
            if let Err(e) = evaluate(*c, &sc, Catalog::builtin(), &args, false) {
                bad.push(format!("{} {a}: {e:?}", c.name()));
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn arrays_address_their_elements_only() {
        let mut k = KnownKeys::default();
        k.add_report(&serde_json::json!({"comms": [{"seconds": 1.0}], "a": {"b": 2}}));
        assert!(k.contains("comms") && k.contains("comms.0.seconds"));
        assert!(k.contains("a") && k.contains("a.b"));
        assert!(!k.contains("comms.") && !k.contains("commsx.0") && !k.contains("a.c"));
    }
}
