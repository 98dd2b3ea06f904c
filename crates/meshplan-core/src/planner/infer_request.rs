//! [`PlanInferRequest`]: every input of a serving-plan search
//! (`meshplan plan infer`, `POST /api/plan/infer`, `meshplan.plan_infer`)
//! with one set of defaults ([`crate::inference::defaults`]) and one
//! validation, so the three front ends build the same request and get the
//! same plans and the same errors; [`plan_infer`] runs it.
//!
//! The model, chip, chips or mesh, engine(s), dtypes, lengths and MFU are
//! the scenario's (`[model]`, `[hardware]`, `[inference]`: a scenario file
//! with the front end's flags or keyword arguments written over it); the
//! search options are the request's own fields.

use serde::{Deserialize, Serialize};

use super::infer::{engines_for, ChipBudget, InferObjective, InferSearch};
use super::infer_disagg::DisaggMode;
use super::infer_report::{plan_infer_search, PlanInferReport};
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::hardware::Chip;
use crate::inference::defaults;
use crate::inference::slo::{slo_seconds, SloValue};
use crate::model::ModelSpec;
use crate::scenario::{Count, InferenceSection, Scenario};
use crate::training::scenario::check_mfu;
use crate::units::DType;

/// One serving-plan search, as every front end describes it. Missing
/// values take the serving [`defaults`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanInferRequest {
    /// Model, chip, chips (`[hardware] chips` or `mesh`: exactly that
    /// slice), engine(s), pinned dtypes, prompt and generated lengths, MFU.
    #[serde(default)]
    pub scenario: Scenario,
    /// Any slice up to this many chips (instead of exactly the scenario's).
    #[serde(default)]
    pub max_chips: Option<Count>,
    /// Time-to-first-token SLO (seconds or "500ms").
    #[serde(default)]
    pub ttft_slo: Option<SloValue>,
    /// Time-per-output-token SLO (seconds or "50ms").
    #[serde(default)]
    pub tpot_slo: Option<SloValue>,
    /// Also search int8/fp8 weights and KV (default: the model's bf16 only,
    /// unless the scenario pins a dtype).
    #[serde(default)]
    pub allow_quantization: Option<bool>,
    /// throughput | cost | latency (default throughput).
    #[serde(default)]
    pub objective: Option<String>,
    /// Plans to list (default [`defaults::PLAN_TOP`]).
    #[serde(default)]
    pub top: Option<usize>,
    /// Derive the plan of this rank (1 = the best).
    #[serde(default)]
    pub explain_rank: Option<usize>,
    /// Worker threads (None: all cores; 1: sequential).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Disaggregated serving: "off" (default: aggregated only), "on"
    /// (aggregated, priced with its prefill on the same chips, and
    /// disaggregated prefill/decode pools) or "only".
    #[serde(default)]
    pub disagg: Option<String>,
}

/// "cannot read WHAT from 'INPUT': expected EXPECTED", naming the input.
fn bad(what: &str, input: impl Into<String>, expected: &str) -> Error {
    Error::BadValue {
        what: what.into(),
        input: input.into(),
        expected: expected.into(),
    }
}

impl PlanInferRequest {
    /// Plans to list: `top`, else [`defaults::PLAN_TOP`].
    pub fn top(&self) -> usize {
        self.top.unwrap_or(defaults::PLAN_TOP)
    }

    /// The chips the search may use: any slice up to `max_chips`, else
    /// exactly the scenario's mesh or chip count.
    pub fn chip_budget(&self, chip: &Chip) -> Result<ChipBudget> {
        let hw = &self.scenario.hardware;
        Ok(match (self.max_chips, &hw.mesh, hw.chips) {
            // one rule for every front end: a limit of no chips is a mistake,
            // not a search with nothing in it
            (Some(c), _, _) if c.0 == 0 => {
                return Err(Error::Invalid(
                    "--max-chips 0 (max_chips in the web API and Python): a serving plan needs at least one chip".into(),
                ))
            }
            (Some(c), _, _) => ChipBudget::AtMost(c.0),
            (None, Some(m), _) => {
                ChipBudget::Exactly(crate::mesh::Topology::parse(chip, m)?.chips())
            }
            (None, None, Some(n)) => ChipBudget::Exactly(n.0),
            (None, None, None) => {
                return Err(Error::Invalid(
                    "no chips given: use --chips N, --mesh SHAPE or --max-chips N (chips, mesh or max_chips in the web API and Python), or the scenario's [hardware]".into(),
                ))
            }
        })
    }

    /// The validated search over `spec` on `chip`: every input checked
    /// here, once, for every front end.
    pub fn search<'a>(&self, spec: &'a ModelSpec, chip: &'a Chip) -> Result<InferSearch<'a>> {
        let inf = &self.scenario.inference;
        let mut s = InferSearch::new(spec, chip, self.chip_budget(chip)?);
        s.prompt_len = inf.prompt_len.map_or(defaults::PROMPT_LEN, |c| c.0);
        s.gen_len = inf.gen_len.map_or(defaults::GEN_LEN, |c| c.0);
        if s.prompt_len == 0 || s.gen_len == 0 {
            return Err(bad(
                "prompt_len / gen_len",
                format!("{} / {}", s.prompt_len, s.gen_len),
                "prompt and generated lengths of at least 1 token",
            ));
        }
        if s.prompt_len.checked_add(s.gen_len).is_none() {
            return Err(bad(
                "prompt_len + gen_len",
                format!("{} + {}", s.prompt_len, s.gen_len),
                "a total length below 2^64 tokens",
            ));
        }
        if self.allow_quantization == Some(true) {
            s.allow_quantization();
        }
        if let Some(d) = &inf.weights_dtype {
            s.weights_dtypes = vec![DType::parse(d)?];
        }
        if let Some(d) = &inf.kv_dtype {
            s.kv_dtypes = vec![DType::parse(d)?];
        }
        s.mfu = inf.mfu.map(check_mfu).transpose()?.unwrap_or(defaults::MFU);
        if let Some(e) = &inf.engine {
            s.engines = engines_for(e, chip)?;
        }
        s.ttft_slo = slo_seconds("ttft_slo", self.ttft_slo.as_ref())?;
        s.tpot_slo = slo_seconds("tpot_slo", self.tpot_slo.as_ref())?;
        s.objective = match &self.objective {
            Some(o) => InferObjective::parse(o)?,
            None => InferObjective::default(),
        };
        let top = self.top();
        if top == 0 {
            return Err(bad("top", "0", "at least 1 plan to list"));
        }
        if self.explain_rank == Some(0) {
            return Err(bad(
                "explain_rank",
                "0",
                "a rank of 1 or more (1 = the best)",
            ));
        }
        // keep enough plans to derive the one asked for
        s.top_k = top.max(self.explain_rank.unwrap_or(0));
        s.threads = self.threads;
        s.disagg = match &self.disagg {
            Some(d) => DisaggMode::parse(d)?,
            None => DisaggMode::default(),
        };
        Ok(s)
    }
}

/// Run a serving-plan search: the one entry point of `meshplan plan infer`,
/// `POST /api/plan/infer` and `meshplan.plan_infer` (they only render).
pub fn plan_infer(req: &PlanInferRequest, cat: &Catalog) -> Result<PlanInferReport> {
    let sc = &req.scenario;
    sc.require_model("use --model NAME or a scenario with [model]")?;
    let spec = sc.model.resolve(cat)?;
    let chip = sc.hardware.resolve_chip(cat)?;
    let s = req.search(&spec, &chip)?;
    let mut report = plan_infer_search(&s, req.top(), req.explain_rank)?;
    report.not_searched = not_searched(&sc.inference);
    Ok(report)
}

/// The scenario's `[inference]` keys the search does not use, as "key =
/// value": it chooses each plan's batch (and context from the lengths) and
/// prices aggregated plans with their own prefill on their chips, so a
/// benchmark workload, a batch, speculative decoding, a prefix-cache hit,
/// fixed pools and a compute dtype belong to `infer` of one plan.
fn not_searched(inf: &InferenceSection) -> Vec<String> {
    let show = |k: &str, v: Option<String>| v.map(|v| format!("{k} = {v}"));
    [
        show("compute_dtype", inf.compute_dtype.clone()),
        show("batch", inf.batch.map(|c| c.0.to_string())),
        show("context", inf.context.map(|c| c.0.to_string())),
        show("workload", inf.workload.clone()),
        show("speculative", inf.speculative.clone()),
        show("spec_gamma", inf.spec_gamma.map(|g| g.to_string())),
        show(
            "spec_acceptance",
            inf.spec_acceptance.map(|a| a.to_string()),
        ),
        show(
            "prefix_cache_hit",
            inf.prefix_cache_hit.map(|h| h.to_string()),
        ),
        show("prefill", inf.prefill.clone()),
        show("decode", inf.decode.clone()),
        show("kv_overlap", inf.kv_overlap.map(|o| o.to_string())),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: serde_json::Value) -> Result<PlanInferRequest> {
        serde_json::from_value(json).map_err(|e| Error::Invalid(e.to_string()))
    }

    fn llama_8b_on_8_h100() -> serde_json::Value {
        serde_json::json!({
            "model": { "name": "llama-3-8b" },
            "hardware": { "chip": "h100", "chips": 8 },
        })
    }

    /// A request that names no length, objective or top reports the serving
    /// defaults from [`defaults`] (not a literal of its own).
    #[test]
    fn an_empty_request_takes_the_serving_defaults() {
        let req = request(serde_json::json!({ "scenario": llama_8b_on_8_h100() })).unwrap();
        let r = plan_infer(&req, Catalog::builtin()).unwrap();
        assert_eq!(r.prompt_len, defaults::PROMPT_LEN);
        assert_eq!(r.gen_len, defaults::GEN_LEN);
        assert_eq!(r.objective, InferObjective::default());
        assert_eq!(r.points.len(), defaults::PLAN_TOP.min(r.fitting as usize));
        // each plan's report is `infer` at the same lengths: KV length
        // prompt + generated, as `infer` would default it
        let p = &r.plans[0].report;
        assert_eq!(p.context, defaults::PROMPT_LEN + defaults::GEN_LEN);
    }

    /// The scenario's keys for `infer` that the search does not use are
    /// listed, not dropped silently; a scenario without them lists none.
    #[test]
    fn keys_the_search_does_not_use_are_said() {
        let mut sc = llama_8b_on_8_h100();
        sc["inference"] =
            serde_json::json!({ "batch": 8, "workload": "lockstep=64", "prompt_len": 512 });
        let req = request(serde_json::json!({ "scenario": sc })).unwrap();
        let r = plan_infer(&req, Catalog::builtin()).unwrap();
        assert_eq!(r.not_searched, ["batch = 8", "workload = lockstep=64"]);
        assert_eq!(r.prompt_len, 512);
        let req = request(serde_json::json!({ "scenario": llama_8b_on_8_h100() })).unwrap();
        assert!(plan_infer(&req, Catalog::builtin())
            .unwrap()
            .not_searched
            .is_empty());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = request(serde_json::json!({ "scenario": llama_8b_on_8_h100(), "top_k": 3 }))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `top_k`"), "{e}");
    }

    #[test]
    fn bad_inputs_name_themselves() {
        let cat = Catalog::builtin();
        let base = serde_json::json!({ "scenario": llama_8b_on_8_h100() });
        let with = |k: &str, v: serde_json::Value| {
            let mut j = base.clone();
            j[k] = v;
            request(j).unwrap()
        };
        for (req, msg) in [
            (with("tpot_slo", serde_json::json!("0s")), "tpot_slo"),
            (with("ttft_slo", serde_json::json!(-1)), "ttft_slo"),
            (
                with("top", serde_json::json!(0)),
                "cannot read top from '0'",
            ),
            (
                with("explain_rank", serde_json::json!(0)),
                "cannot read explain_rank from '0'",
            ),
            (with("objective", serde_json::json!("speed")), "speed"),
        ] {
            let e = plan_infer(&req, cat).unwrap_err().to_string();
            assert!(e.contains(msg), "{msg}: {e}");
        }
        let mut j = base.clone();
        j["scenario"]["inference"] = serde_json::json!({ "mfu": 0.0 });
        let e = plan_infer(&request(j).unwrap(), cat)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mfu"), "{e}");
    }

    /// Deriving rank 3 of a listing of 1 keeps 3 plans ranked (the CLI
    /// did, the web and Python did not).
    #[test]
    fn explain_rank_beyond_top_is_derived() {
        let j =
            serde_json::json!({ "scenario": llama_8b_on_8_h100(), "top": 1, "explain_rank": 3 });
        let r = plan_infer(&request(j).unwrap(), Catalog::builtin()).unwrap();
        assert_eq!(r.plans.len(), 1);
        assert!(r.derivation.is_some());
    }
}
