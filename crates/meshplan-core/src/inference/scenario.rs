//! Scenario → inference query: the defaults and validation that
//! `meshplan infer` applies (shared with `meshplan check`). Flags are
//! written into the [`Scenario`] first (they override the file), then
//! [`resolve`] turns it into a model, a chip and an [`InferQuery`].

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::hardware::{parse_shape, Chip};
use crate::inference::serving::disagg::{DisaggSpec, PoolLayout};
use crate::inference::serving::{EngineProfile, Workload};
use crate::inference::speculative::{check_prefix_hit, DraftMethod, Speculative};
use crate::mesh::Topology;
use crate::model::ModelSpec;
use crate::scenario::{InferenceSection, Scenario};
use crate::training::scenario::{check_mfu, topology_for_chips};
use crate::units::DType;

use super::{check_mesh, defaults, InferQuery, Sharding};

/// Everything [`super::evaluate`] needs.
#[derive(Clone, Debug)]
pub struct InferSetup {
    /// The model.
    pub model: ModelSpec,
    /// The chip.
    pub chip: Chip,
    /// The query.
    pub query: InferQuery,
    /// Disaggregated prefill/decode pools (`prefill` and `decode` keys).
    pub disagg: Option<DisaggSpec>,
}

fn dtype(s: Option<&str>, default: DType) -> Result<DType> {
    Ok(match s {
        Some(v) => DType::parse(v)?,
        None => default,
    })
}

/// Resolve a scenario (with any flags already written into it) the way
/// `meshplan infer` does: the mesh is `[hardware] mesh`, else `chips`; the
/// slice must be one the chip offers; weights bf16, KV in the weight dtype,
/// batch 1, prompt min(context, 2048) (2048 without a context), 512
/// generated tokens (the [`defaults`] every serving front end reads), context prompt + generated tokens, 1D sharding, MFU 1;
/// the engine is the ideal roofline on `@book` chips and TPUs, vLLM on GPUs;
/// compute bf16, or the weight dtype when the engine runs low-precision
/// GEMMs and the chip has a peak for it (fp8/int8/fp4 W8A8, W4A4).
pub fn resolve(sc: &Scenario, cat: &Catalog) -> Result<InferSetup> {
    if sc.model.name.is_none() && !sc.model.has_overrides() {
        return Err(Error::Invalid(
            "no model given: use --model NAME or a scenario with [model]".into(),
        ));
    }
    let model = sc.model.resolve(cat)?;
    let chip = sc.hardware.resolve_chip(cat)?;
    let inf = &sc.inference;
    let disagg = disagg_spec(inf)?;
    if disagg.is_some() && chip.ici.is_some() {
        return Err(Error::Invalid(format!(
            "prefill and decode pools (--prefill, --decode) are GPU deployments: {} serves one slice with one layout",
            chip.name
        )));
    }
    let mesh = match (&sc.hardware.mesh, sc.hardware.chips) {
        (Some(m), _) => parse_shape(m)?,
        (None, Some(c)) => match (&chip.ici, topology_for_chips(&chip, c.0)) {
            // A TPU chip count names the slice offered with that many chips
            // (as `train` reads it); any other count is a 1-D mesh, which
            // `check_mesh` then accepts or rejects with the offered shapes.
            (Some(_), Ok(Topology::Torus { shape, .. })) => shape,
            _ => vec![c.0],
        },
        // disaggregated pools name their own chips
        (None, None) => match &disagg {
            Some(d) => vec![disagg_chips(d)?],
            None => {
                return Err(Error::Invalid(
                    "no slice given: use --mesh 4x4 (TPU) or --chips N".into(),
                ))
            }
        },
    };
    let n = mesh.iter().try_fold(1u64, |a, &x| a.checked_mul(x));
    crate::mesh::check_chip_count(n.unwrap_or(u64::MAX)).map_err(Error::Invalid)?;
    check_mesh(&chip, &mesh)?;
    if let (Some(d), Some(n)) = (&disagg, n) {
        let pools = disagg_chips(d)?;
        if pools != n {
            return Err(Error::Invalid(format!(
                "the prefill and decode pools use {pools} chips but the slice has {n}: drop --chips/--mesh or make them agree"
            )));
        }
    }
    let wdt = dtype(inf.weights_dtype.as_deref(), DType::Bf16)?;
    let kvdt = dtype(inf.kv_dtype.as_deref(), wdt)?;
    let engine = match inf.engine.as_deref() {
        Some(e) => EngineProfile::builtin(e)?,
        None => EngineProfile::default_for(&chip),
    };
    engine.check_chip(&chip)?;
    let cdt = dtype(
        inf.compute_dtype.as_deref(),
        engine.native_compute(&chip, wdt).unwrap_or(DType::Bf16),
    )?;
    let gen_len = inf.gen_len.map_or(defaults::GEN_LEN, |c| c.0);
    let prompt_len = match (inf.prompt_len, inf.context) {
        (Some(p), _) => p.0,
        (None, Some(c)) => c.0.min(defaults::PROMPT_LEN),
        (None, None) => defaults::PROMPT_LEN,
    };
    let context = match inf.context {
        Some(c) => c.0,
        None => prompt_len.saturating_add(gen_len),
    };
    let workload = match inf.workload.as_deref() {
        Some(w) => Workload::parse(w)?,
        None => Workload::Static,
    };
    let query = InferQuery {
        weights_dtype: wdt,
        kv_dtype: kvdt,
        compute_dtype: cdt,
        batch: inf.batch.map_or(defaults::BATCH, |c| c.0),
        prompt_len,
        context,
        gen_len,
        mesh,
        tp: sc.parallelism.tp,
        ep: sc.parallelism.ep,
        pp: sc.parallelism.pp,
        sharding: match sc.parallelism.sharding.as_deref() {
            Some(s) => Sharding::parse(s)?,
            None => Sharding::OneD,
        },
        mfu: inf.mfu.map(check_mfu).transpose()?.unwrap_or(defaults::MFU),
        engine: Some(engine),
        workload,
        speculative: speculative(inf, cat)?,
        prefix_cache_hit: check_prefix_hit(inf.prefix_cache_hit.unwrap_or(0.0))?,
    };
    Ok(InferSetup {
        model,
        chip,
        query,
        disagg,
    })
}

/// The `prefill` / `decode` / `kv_overlap` keys: both pools or neither.
fn disagg_spec(inf: &InferenceSection) -> Result<Option<DisaggSpec>> {
    match (&inf.prefill, &inf.decode) {
        (None, None) if inf.kv_overlap.is_some() => Err(Error::Invalid(
            "kv_overlap (--kv-overlap) needs disaggregated pools: give prefill and decode (--prefill, --decode)".into(),
        )),
        (None, None) => Ok(None),
        (Some(p), Some(d)) => Ok(Some(DisaggSpec {
            prefill: PoolLayout::parse("prefill (--prefill)", p)?,
            decode: PoolLayout::parse("decode (--decode)", d)?,
            kv_overlap: inf.kv_overlap.unwrap_or(false),
        })),
        _ => Err(Error::Invalid(
            "disaggregated serving needs both pools: prefill and decode (--prefill tp=4,workers=2 --decode tp=8,workers=1)".into(),
        )),
    }
}

/// Chips of both pools: `W_p·c_p + W_d·c_d`.
fn disagg_chips(d: &DisaggSpec) -> Result<u64> {
    let pool = |p: &PoolLayout| p.chips_per_worker().and_then(|c| c.checked_mul(p.workers));
    pool(&d.prefill)
        .zip(pool(&d.decode))
        .and_then(|(a, b)| a.checked_add(b))
        .ok_or_else(|| Error::Invalid("prefill and decode pools: too many chips".into()))
}

/// The `[inference]` speculative keys: `speculative = "ngram" | "mtp" |
/// "draft:MODEL"`, `spec_gamma` (default 4), `spec_acceptance` (required).
fn speculative(inf: &InferenceSection, cat: &Catalog) -> Result<Option<Speculative>> {
    let Some(m) = inf.speculative.as_deref() else {
        if inf.spec_gamma.is_some() || inf.spec_acceptance.is_some() {
            return Err(Error::Invalid(
                "spec_gamma / spec_acceptance need speculative = ngram | mtp | draft:MODEL".into(),
            ));
        }
        return Ok(None);
    };
    let method = match m.trim() {
        "none" | "off" => return Ok(None),
        "ngram" | "prompt-lookup" => DraftMethod::Ngram,
        "mtp" | "eagle" | "medusa" => DraftMethod::Mtp,
        d => match d.strip_prefix("draft:") {
            Some(name) => DraftMethod::Draft(Box::new(cat.model(name.trim())?.clone())),
            None => {
                return Err(Error::BadValue {
                    what: "speculative".into(),
                    input: m.into(),
                    expected: "ngram, mtp or draft:MODEL".into(),
                })
            }
        },
    };
    let alpha = inf.spec_acceptance.ok_or_else(|| {
        Error::Invalid(
            "speculative decoding needs an acceptance rate: spec_acceptance = α in [0, 1] (--spec-acceptance)".into(),
        )
    })?;
    Speculative::new(method, inf.spec_gamma.unwrap_or(4), alpha).map(Some)
}
