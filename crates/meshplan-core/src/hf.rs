/*!
Offline import of Hugging Face `config.json` files.

Maps each supported `model_type` onto [`Arch`], including the details that
decide exact parameter counts (biases, norm kind and count, qk-norm, tied
embeddings, MoE and MLA layouts). Only the text decoder is counted: vision
towers of multimodal configs (Gemma-3) and DeepSeek-V3's multi-token-prediction
module are not part of the result, which the notes say.
*/

use serde_json::Value;

use crate::error::{from_json, line_col, Error, Result};
use crate::model::{
    Arch, LinearAttention, Mla, MlpKind, ModelSpec, Moe, NormKind, SlidingWindow, SparseAttention,
};

/// `model_type` values this importer understands.
pub const SUPPORTED: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "deepseek_v3",
    "deepseek_v32",
    "gpt2",
    "gpt_neox",
    "phi3",
];

struct Cfg<'a> {
    v: &'a Value,
    file: &'a str,
    /// The whole file, to point errors at the offending key.
    src: &'a str,
    /// Byte offset where this section starts in `src` (`text_config` for Gemma-3).
    start: usize,
}

impl Cfg<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.v.get(k).filter(|x| !x.is_null())
    }
    fn u(&self, k: &str) -> Result<u64> {
        match self.get(k) {
            Some(x) => x.as_u64().ok_or_else(|| self.bad(k, x)),
            None => Err(self.err(k, "is required for this model_type")),
        }
    }
    fn u_or(&self, k: &str, d: u64) -> Result<u64> {
        match self.get(k) {
            Some(x) => x.as_u64().ok_or_else(|| self.bad(k, x)),
            None => Ok(d),
        }
    }
    fn b_or(&self, k: &str, d: bool) -> Result<bool> {
        match self.get(k) {
            Some(x) => x
                .as_bool()
                .ok_or_else(|| self.err(k, &format!("must be true or false, not {x}"))),
            None => Ok(d),
        }
    }
    fn bad(&self, k: &str, x: &Value) -> Error {
        self.err(k, &format!("must be a non-negative integer, not {x}"))
    }
    /// An error about key `k`, located at the key's first occurrence in the
    /// section (line 1 when it is absent).
    fn err(&self, k: &str, why: &str) -> Error {
        let needle = format!("\"{k}\"");
        let (line, column) = self
            .src
            .get(self.start..)
            .and_then(|rest| rest.find(&needle))
            .map(|i| line_col(self.src, self.start + i))
            .unwrap_or((1, 1));
        Error::Parse {
            file: self.file.into(),
            line,
            column,
            field: Some(k.into()),
            message: why.into(),
        }
    }
}

/// An `Arch` with the common defaults (gated MLP, 2 RMSNorms per layer and a
/// final one, no biases, untied) and the given dimensions; the caller fills in
/// F and the family's details.
fn skeleton(n_layers: u64, d: u64, n: u64, k: u64, h: u64, vocab: u64, tied: bool) -> Arch {
    Arch {
        tied_embeddings: tied,
        ..Arch::dense(n_layers, d, 0, n, k, h, vocab)
    }
}

/// Number of attention heads under key `heads`, at least 1.
fn heads(c: &Cfg, heads: &str) -> Result<u64> {
    let n = c.u(heads)?;
    if n == 0 {
        return Err(c.err(heads, "must be at least 1"));
    }
    Ok(n)
}

/// The common layout, with `head_dim` defaulting to `hidden / heads` and
/// `num_key_value_heads` to `heads`; untied unless `tie_word_embeddings`
/// says otherwise (the default of every supported config class except
/// GPT-2 and Gemma, which set their own).
fn base(c: &Cfg, hidden: &str, layers: &str, heads_key: &str, vocab: &str) -> Result<Arch> {
    let d = c.u(hidden)?;
    let n = heads(c, heads_key)?;
    let h = match c.get("head_dim") {
        Some(_) => c.u("head_dim")?,
        None => head_dim(c, d, n, heads_key)?,
    };
    Ok(skeleton(
        c.u(layers)?,
        d,
        n,
        c.u_or("num_key_value_heads", n)?,
        h,
        c.u(vocab)?,
        c.b_or("tie_word_embeddings", false)?,
    ))
}

/// [`base`] under the key names most families use (`hidden_size`,
/// `num_hidden_layers`, `num_attention_heads`, `vocab_size`).
fn standard_base(c: &Cfg) -> Result<Arch> {
    base(
        c,
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "vocab_size",
    )
}

/// `attention_bias`: one flag for the Q/K/V and the output projection biases.
fn attention_bias(c: &Cfg, a: &mut Arch, default: bool) -> Result<()> {
    let bias = c.b_or("attention_bias", default)?;
    a.qkv_bias = bias;
    a.attn_out_bias = bias;
    Ok(())
}

/// `hidden / heads`, which must divide (transformers refuses otherwise).
fn head_dim(c: &Cfg, d: u64, n: u64, heads: &str) -> Result<u64> {
    if d % n != 0 {
        return Err(c.err(
            heads,
            &format!("the hidden size {d} is not divisible by {n} attention heads (and no head_dim is given)"),
        ));
    }
    Ok(d / n)
}

/// Newer Gemma-3 configs list `layer_types` ("sliding_attention" /
/// "full_attention") instead of `sliding_window_pattern`, Qwen3-Next's
/// ("linear_attention" / "full_attention") instead of
/// `full_attention_interval`; meshplan models "every p-th layer is full", so
/// the list must have that shape. `other` names the non-full kind.
fn pattern_from_layer_types(c: &Cfg, t: &Value, other: &str) -> Result<u64> {
    let bad = || {
        c.err(
            "layer_types",
            &format!("must be a list of \"{other}\" / \"full_attention\""),
        )
    };
    let xs = t.as_array().ok_or_else(bad)?;
    let mut full = Vec::new();
    for (i, x) in xs.iter().enumerate() {
        match x.as_str() {
            Some("full_attention") => full.push(i as u64),
            Some(k) if k == other => {}
            _ => return Err(bad()),
        }
    }
    let len = xs.len() as u64;
    let p = match full.first() {
        Some(&i) => i + 1,
        // No global layer: a period longer than the stack.
        None => return Ok(len + 1),
    };
    if full.iter().copied().ne((1..=len / p).map(|j| j * p - 1)) {
        return Err(c.err(
            "layer_types",
            "only patterns with every p-th layer full (as sliding_window_pattern / full_attention_interval) are supported",
        ));
    }
    Ok(p)
}

fn window(c: &Cfg, global_every: u64) -> Result<Option<SlidingWindow>> {
    Ok(match c.get("sliding_window") {
        Some(_) => Some(SlidingWindow {
            window: c.u("sliding_window")?,
            global_every,
        }),
        None => None,
    })
}

/// `model_type` "llama" | "mistral" | "phi3".
fn llama_like(c: &Cfg, mt: &str) -> Result<Arch> {
    let mut a = standard_base(c)?;
    a.d_ff = c.u("intermediate_size")?;
    attention_bias(c, &mut a, false)?;
    a.mlp_bias = c.b_or("mlp_bias", false)?;
    if mt != "llama" {
        a.sliding_window = window(c, 0)?;
    }
    Ok(a)
}

/// `model_type` "mixtral".
fn mixtral(c: &Cfg) -> Result<Arch> {
    let mut a = standard_base(c)?;
    a.d_ff = c.u("intermediate_size")?;
    a.moe = Some(Moe {
        n_experts: c.u("num_local_experts")?,
        top_k: c.u("num_experts_per_tok")?,
        d_ff_expert: a.d_ff,
        n_shared_experts: 0,
        d_ff_shared: 0,
        first_dense_layers: 0,
        router_bias: false,
    });
    a.sliding_window = window(c, 0)?;
    Ok(a)
}

/// `model_type` "qwen2" | "qwen3" | "qwen3_moe".
fn qwen(c: &Cfg, mt: &str) -> Result<Arch> {
    let mut a = standard_base(c)?;
    a.d_ff = c.u_or("intermediate_size", 0)?;
    if mt == "qwen2" {
        // Qwen2 always has q/k/v biases and none on o_proj.
        a.qkv_bias = true;
    } else {
        attention_bias(c, &mut a, false)?;
        a.qk_norm = true;
    }
    if c.b_or("use_sliding_window", false)? {
        a.sliding_window = window(c, 0)?;
    }
    if mt == "qwen3_moe" || mt == "qwen3_next" {
        let dense = match c.get("mlp_only_layers") {
            Some(Value::Array(xs)) => xs.len() as u64,
            _ => 0,
        };
        if c.u_or("decoder_sparse_step", 1)? != 1 || dense > 0 {
            return Err(c.err(
                "decoder_sparse_step",
                "only configs where every layer is MoE (decoder_sparse_step = 1, no mlp_only_layers) are supported",
            ));
        }
        // Qwen3-Next adds one shared expert of this width (0 or absent: none)
        let shared = c.u_or("shared_expert_intermediate_size", 0)?;
        a.moe = Some(Moe {
            n_experts: c.u("num_experts")?,
            top_k: c.u("num_experts_per_tok")?,
            d_ff_expert: c.u("moe_intermediate_size")?,
            n_shared_experts: u64::from(shared > 0),
            d_ff_shared: shared,
            first_dense_layers: 0,
            router_bias: false,
        });
    }
    Ok(a)
}

/// `model_type` "qwen3_next": Qwen3-MoE with a shared expert, gated full
/// attention every `full_attention_interval` layers (or as `layer_types`
/// lists) and Gated DeltaNet in the others. Absent keys take
/// `Qwen3NextConfig`'s defaults (transformers).
fn qwen3_next(c: &Cfg, notes: &mut Vec<&'static str>) -> Result<Arch> {
    let mut a = qwen(c, "qwen3_next")?;
    a.attn_output_gate = c.b_or("attn_output_gate", true)?;
    let interval = match c.get("layer_types") {
        Some(t) => pattern_from_layer_types(c, t, "linear_attention")?,
        None => c.u_or("full_attention_interval", 4)?,
    };
    if interval == 0 {
        return Err(c.err("full_attention_interval", "must be at least 1"));
    }
    a.linear_attention = Some(LinearAttention {
        full_attention_interval: interval,
        n_key_heads: c.u_or("linear_num_key_heads", 16)?,
        n_value_heads: c.u_or("linear_num_value_heads", 32)?,
        key_head_dim: c.u_or("linear_key_head_dim", 128)?,
        value_head_dim: c.u_or("linear_value_head_dim", 128)?,
        conv_kernel: c.u_or("linear_conv_kernel_dim", 4)?,
    });
    notes.push("the shared expert's sigmoid gate (D per layer) and the multi-token-prediction layer are not counted");
    Ok(a)
}

/// `model_type` "gemma2" | "gemma3" | "gemma3_text".
fn gemma(c: &Cfg, mt: &str) -> Result<Arch> {
    // Gemma configs leave keys at their transformers defaults (the
    // gemma-3-27b `text_config` has no vocab_size, for instance):
    // Gemma2Config / Gemma3TextConfig defaults apply when absent.
    let gemma3 = mt != "gemma2";
    let n = heads(c, "num_attention_heads")?;
    let mut a = skeleton(
        c.u("num_hidden_layers")?,
        c.u("hidden_size")?,
        n,
        c.u_or("num_key_value_heads", n)?,
        c.u_or("head_dim", 256)?,
        c.u_or("vocab_size", if gemma3 { 262_208 } else { 256_000 })?,
        c.b_or("tie_word_embeddings", true)?,
    );
    a.d_ff = c.u("intermediate_size")?;
    a.norms_per_layer = 4;
    attention_bias(c, &mut a, false)?;
    let w = c.u_or("sliding_window", 4096)?;
    if gemma3 {
        a.qk_norm = true;
        // Layer i (0-based) is local unless (i+1) % pattern == 0.
        let every = match c.get("layer_types") {
            Some(t) => pattern_from_layer_types(c, t, "sliding_attention")?,
            None => c.u_or("sliding_window_pattern", 6)?,
        };
        if every == 0 {
            return Err(c.err("sliding_window_pattern", "must be at least 1"));
        }
        a.sliding_window = Some(SlidingWindow {
            window: w,
            global_every: every,
        });
    } else {
        // Gemma-2: even (0-based) layers are local, odd ones global.
        a.sliding_window = Some(SlidingWindow {
            window: w,
            global_every: 2,
        });
    }
    Ok(a)
}

/// `model_type` "deepseek_v3".
fn deepseek_v3(c: &Cfg, notes: &mut Vec<&'static str>) -> Result<Arch> {
    // MLA: head widths come from the q/k/v head dims, not hidden / heads,
    // and num_key_value_heads is irrelevant.
    let n = heads(c, "num_attention_heads")?;
    let mut a = skeleton(
        c.u("num_hidden_layers")?,
        c.u("hidden_size")?,
        n,
        n,
        1,
        c.u("vocab_size")?,
        c.b_or("tie_word_embeddings", false)?,
    );
    a.d_ff = c.u("intermediate_size")?;
    if c.u_or("moe_layer_freq", 1)? != 1 {
        return Err(c.err(
            "moe_layer_freq",
            "only configs where every layer after first_k_dense_replace is MoE (moe_layer_freq = 1) are supported",
        ));
    }
    let mla = Mla {
        q_lora_rank: c.u_or("q_lora_rank", 0)?,
        kv_lora_rank: c.u("kv_lora_rank")?,
        qk_nope_head_dim: c.u("qk_nope_head_dim")?,
        qk_rope_head_dim: c.u("qk_rope_head_dim")?,
        v_head_dim: c.u("v_head_dim")?,
    };
    // Sums of head dims must fit before Arch::validate sees them.
    for (k, x, y) in [
        (
            "qk_rope_head_dim",
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
        ),
        ("qk_rope_head_dim", mla.kv_lora_rank, mla.qk_rope_head_dim),
        ("v_head_dim", mla.qk_nope_head_dim, mla.v_head_dim),
    ] {
        if x.checked_add(y).is_none() {
            return Err(c.err(k, "overflows; check the hyperparameters"));
        }
    }
    a.d_head = mla.v_head_dim;
    a.mla = Some(mla);
    a.qkv_bias = false;
    let router_bias = c
        .get("topk_method")
        .and_then(Value::as_str)
        .is_some_and(|m| m == "noaux_tc");
    a.moe = Some(Moe {
        n_experts: c.u("n_routed_experts")?,
        top_k: c.u("num_experts_per_tok")?,
        d_ff_expert: c.u("moe_intermediate_size")?,
        n_shared_experts: c.u_or("n_shared_experts", 0)?,
        d_ff_shared: 0,
        first_dense_layers: c.u_or("first_k_dense_replace", 0)?,
        router_bias,
    });
    if c.u_or("num_nextn_predict_layers", 0)? > 0 {
        notes.push("multi-token-prediction layers are not counted (as in the published 671B)");
    }
    Ok(a)
}

/// `model_type` "deepseek_v32": DeepSeek-V3 with DeepSeek sparse attention
/// (`index_topk`, `index_n_heads`, `index_head_dim`).
fn deepseek_v32(c: &Cfg, notes: &mut Vec<&'static str>) -> Result<Arch> {
    let mut a = deepseek_v3(c, notes)?;
    a.sparse_attention = Some(SparseAttention {
        index_topk: c.u("index_topk")?,
        index_n_heads: c.u("index_n_heads")?,
        index_head_dim: c.u("index_head_dim")?,
    });
    Ok(a)
}

/// `model_type` "gpt2".
fn gpt2(c: &Cfg) -> Result<Arch> {
    let mut a = base(c, "n_embd", "n_layer", "n_head", "vocab_size")?;
    a.n_kv_heads = a.n_heads;
    a.d_head = a.d_model / a.n_heads;
    // Saturating: an absurd n_embd must reach validate(), not overflow here.
    a.d_ff = c.u_or("n_inner", a.d_model.saturating_mul(4))?;
    a.tied_embeddings = c.b_or("tie_word_embeddings", true)?;
    a.mlp = MlpKind::Plain;
    a.norm = NormKind::Layer;
    a.qkv_bias = true;
    a.attn_out_bias = true;
    a.mlp_bias = true;
    a.learned_pos_emb = c.u("n_positions")?;
    Ok(a)
}

/// `model_type` "gpt_neox".
fn gpt_neox(c: &Cfg) -> Result<Arch> {
    let mut a = standard_base(c)?;
    a.n_kv_heads = a.n_heads;
    a.d_head = a.d_model / a.n_heads;
    a.d_ff = c.u("intermediate_size")?;
    a.mlp = MlpKind::Plain;
    a.norm = NormKind::Layer;
    attention_bias(c, &mut a, true)?;
    a.mlp_bias = true;
    Ok(a)
}

/// Import a `config.json` (text) read from `path`, named by [`model_name`].
pub fn import_file(src: &str, path: &str) -> Result<ModelSpec> {
    let root: Value = from_json(src, path)?;
    import(src, path, &model_name(&root, path))
}

/// The name of a model imported from `path`: its file stem
/// (`llama-3.1-8b.json`); for the generic `config.json` of a Hugging Face
/// download, the directory it was downloaded to (`Llama-3.1-8B/config.json`,
/// as `--local-dir` names it), unless that is a hub-cache snapshot hash;
/// then the config's own `_name_or_path` (its last path segment,
/// `meta-llama/Llama-2-7b-hf` → `Llama-2-7b-hf`) and last its `model_type`.
/// Before this every downloaded model was named "config".
pub fn model_name(root: &Value, path: &str) -> String {
    let p = std::path::Path::new(path);
    let part = |s: Option<&std::ffi::OsStr>| s.map(|x| x.to_string_lossy().into_owned());
    let stem = part(p.file_stem()).unwrap_or_default();
    if !stem.is_empty() && !stem.eq_ignore_ascii_case("config") {
        return stem;
    }
    let dir = part(p.parent().and_then(|d| d.file_name())).unwrap_or_default();
    let snapshot = dir.len() == 40 && dir.bytes().all(|b| b.is_ascii_hexdigit());
    if !dir.is_empty() && !snapshot {
        return dir;
    }
    let own = |k: &str| root.get(k).and_then(Value::as_str).map(str::trim);
    let named = own("_name_or_path")
        .and_then(|n| n.trim_end_matches('/').rsplit('/').next())
        .filter(|n| !n.is_empty());
    named
        .or_else(|| own("model_type").filter(|t| !t.is_empty()))
        .unwrap_or("imported")
        .to_string()
}

/// Import a `config.json` (text) as a model spec named `name`.
pub fn import(src: &str, file: &str, name: &str) -> Result<ModelSpec> {
    let root: Value = from_json(src, file)?;
    let mut v = &root;
    let model_type = root
        .get("model_type")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::Parse {
            file: file.into(),
            line: 1,
            column: 1,
            field: Some("model_type".into()),
            message: format!("missing; supported model types: {}", SUPPORTED.join(", ")),
        })?
        .to_string();
    let mut notes = Vec::new();
    let mut start = 0;
    if model_type == "gemma3" {
        v = root
            .get("text_config")
            .filter(|t| t.is_object())
            .ok_or_else(|| Error::Parse {
                file: file.into(),
                line: 1,
                column: 1,
                field: Some("text_config".into()),
                message: "a gemma3 config needs its text_config object".into(),
            })?;
        start = src.find("\"text_config\"").unwrap_or(0);
        notes.push("text decoder only (the vision tower is not counted)");
    }
    let c = Cfg {
        v,
        file,
        src,
        start,
    };
    let mut a = match model_type.as_str() {
        "llama" | "mistral" | "phi3" => llama_like(&c, &model_type)?,
        "mixtral" => mixtral(&c)?,
        "qwen2" | "qwen3" | "qwen3_moe" => qwen(&c, &model_type)?,
        "gemma2" | "gemma3" | "gemma3_text" => gemma(&c, &model_type)?,
        "deepseek_v3" => deepseek_v3(&c, &mut notes)?,
        "deepseek_v32" => deepseek_v32(&c, &mut notes)?,
        "qwen3_next" => qwen3_next(&c, &mut notes)?,
        "gpt2" => gpt2(&c)?,
        "gpt_neox" => gpt_neox(&c)?,
        other => {
            return Err(Error::UnsupportedModelType {
                model_type: other.into(),
                supported: SUPPORTED.iter().map(|s| s.to_string()).collect(),
            })
        }
    };
    if a.d_ff == 0 && a.moe.is_some() {
        a.d_ff = a.d_ff_expert();
    }
    a.validate()?;
    let default_max_seq = match model_type.as_str() {
        "gemma3" | "gemma3_text" => 131_072,
        "gemma2" => 8192,
        _ => c.u_or("n_positions", 0)?,
    };
    let max_seq = c.u_or("max_position_embeddings", default_max_seq)?;
    Ok(ModelSpec {
        name: name.into(),
        display_name: name.into(),
        aliases: vec![],
        source: format!("{file} (Hugging Face config, model_type {model_type})"),
        max_seq_len: max_seq,
        notes: notes.join("; "),
        published: None,
        arch: a,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downloaded_config_is_named_after_its_model_not_config() {
        let llama2: Value = serde_json::from_str(
            r#"{"_name_or_path": "meta-llama/Llama-2-7b-hf", "model_type": "llama"}"#,
        )
        .unwrap();
        let bare: Value = serde_json::from_str(r#"{"model_type": "llama"}"#).unwrap();
        // a file named for its model keeps its stem
        assert_eq!(model_name(&bare, "hf/llama-3.1-8b.json"), "llama-3.1-8b");
        // `--local-dir Llama-3.1-8B`: the directory
        assert_eq!(
            model_name(&bare, "m/Llama-3.1-8B/config.json"),
            "Llama-3.1-8B"
        );
        // a hub-cache snapshot (a commit hash): the config's own name
        let snap = format!(
            "snapshots/{}/config.json",
            &"0123456789abcdef".repeat(3)[..40]
        );
        assert_eq!(model_name(&llama2, &snap), "Llama-2-7b-hf");
        // a pasted config.json (the web API) with and without `_name_or_path`
        assert_eq!(model_name(&llama2, "config.json"), "Llama-2-7b-hf");
        assert_eq!(model_name(&bare, "config.json"), "llama");
    }

    #[test]
    fn unknown_model_type_lists_supported() {
        let e = import(r#"{"model_type": "bert"}"#, "c.json", "x").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("bert") && s.contains("llama") && s.contains("deepseek_v3"),
            "{s}"
        );
    }

    #[test]
    fn missing_field_named() {
        let e = import(
            r#"{"model_type": "llama", "hidden_size": 64}"#,
            "c.json",
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("num_attention_heads"), "{e}");
    }

    #[test]
    fn syntax_error_has_line() {
        let e = import("{\n\"model_type\": \"llama\",\n oops\n}", "c.json", "x").unwrap_err();
        match e {
            Error::Parse { line, .. } => assert_eq!(line, 3),
            e => panic!("{e}"),
        }
    }
}
