//! Requests: the JSON bodies the endpoints take, read strictly (unknown
//! fields, wrong types and non-objects are 400s naming the field), the
//! scenario they carry turned into the catalog and scenario the core
//! resolves, and the web API's limits on searches.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use meshplan_core::inference::slo::{SloValue, Slos};
use meshplan_core::scenario::{Count, Scenario};
use meshplan_core::Catalog;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::{ApiError, MAX_SEARCH_CHIPS, MAX_STRING_BYTES, MAX_TOP};

/// A request's scenario resolved for the core: the scenario, and the
/// catalog it names its model in (the shared one, or a copy holding a
/// pasted config.json).
pub(crate) type Resolved<'c> = (Scenario, Cow<'c, Catalog>);

/// `POST /api/train` and `POST /api/infer`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct EvalRequest {
    /// The scenario: `model`, `hardware`, `training`, `inference`,
    /// `parallelism` sections as in a scenario TOML file.
    #[serde(default)]
    pub scenario: Scenario,
    /// A pasted Hugging Face `config.json`: the model, instead of
    /// `scenario.model.name` (as `meshplan --model config.json`).
    #[serde(default)]
    pub model_config: Option<String>,
    /// Include the derivation in the book's symbols (`--explain`).
    #[serde(default)]
    pub explain: bool,
    /// Infer only: TTFT SLO line on the serving plot ("500ms" or seconds),
    /// checked by the core as in every front end.
    #[serde(default)]
    pub ttft_slo: Option<SloValue>,
    /// Infer only: TPOT SLO line on the serving plot.
    #[serde(default)]
    pub tpot_slo: Option<SloValue>,
}

/// `POST /api/plan/train` and `POST /api/plan/infer`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The scenario: `model`, `hardware`, `training`, `inference`,
    /// `parallelism` sections as in a scenario TOML file.
    #[serde(default)]
    pub scenario: Scenario,
    /// A pasted Hugging Face `config.json`: the model, instead of
    /// `scenario.model.name` (as `meshplan --model config.json`).
    #[serde(default)]
    pub model_config: Option<String>,
    /// Objective (`--objective`): time | cost | memory-headroom for
    /// training, throughput | cost | latency for serving.
    #[serde(default)]
    pub objective: Option<String>,
    /// Plans to list (`--top`, default 10, at most [`MAX_TOP`]).
    #[serde(default)]
    pub top: Option<usize>,
    /// Serving only: any slice up to this many chips (`--max-chips`).
    #[serde(default)]
    pub max_chips: Option<Count>,
    /// Serving only: TTFT SLO (`--ttft-slo`).
    #[serde(default)]
    pub ttft_slo: Option<SloValue>,
    /// Serving only: TPOT SLO (`--tpot-slo`).
    #[serde(default)]
    pub tpot_slo: Option<SloValue>,
    /// Serving only: let the search quantize a bf16 model's weights and KV
    /// (`--allow-quantization`; off: the model's own dtypes).
    #[serde(default)]
    pub allow_quantization: Option<bool>,
    /// Serving only: disaggregated prefill/decode pools, off | on | only
    /// (`--disagg`).
    #[serde(default)]
    pub disagg: Option<String>,
    /// Training only: also search the global batch up to this, tokens
    /// ("16Mi") or sequences ("2048 seqs") (`--max-global-batch`).
    #[serde(default)]
    pub max_global_batch: Option<String>,
    /// Training only: compute dtypes to search, "bf16,fp8" (`--dtypes`).
    #[serde(default)]
    pub dtypes: Option<String>,
    /// Training only: also search fp8 compute where the chip and framework
    /// support it (`--allow-fp8`).
    #[serde(default)]
    pub allow_fp8: Option<bool>,
}

/// The first [`PREFIX_CHARS`] characters of a string the user sent, with
/// "…" and its length when cut: what error messages echo.
pub(crate) fn prefix(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(PREFIX_CHARS) {
        None => Cow::Borrowed(s),
        Some((i, _)) => Cow::Owned(format!("{}… ({} bytes)", &s[..i], s.len())),
    }
}

/// Characters of a user's string an error message repeats.
pub(crate) const PREFIX_CHARS: usize = 40;

/// Whether a Content-Type is JSON: exactly `application/json`, any case,
/// with optional parameters (`; charset=utf-8`) — not a prefix match, so
/// `application/jsonx` is refused.
fn is_json(ct: &str) -> bool {
    let essence = ct.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Refuse a string longer than [`MAX_STRING_BYTES`] anywhere in the body
/// but `model_config` (a pasted config.json), naming its field and echoing
/// only its start: checked before any name is looked up.
fn short_strings(v: &serde_json::Value, path: &str) -> Result<(), ApiError> {
    use serde_json::Value;
    match v {
        Value::String(s) if s.len() > MAX_STRING_BYTES => Err(ApiError::bad_request(format!(
            "{path}: a string of {} bytes ('{}'); names and values are at most {MAX_STRING_BYTES} bytes",
            s.len(),
            prefix(s)
        ))),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| short_strings(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().try_for_each(|(k, x)| {
            let here = if path.is_empty() {
                prefix(k).into_owned()
            } else {
                format!("{path}.{}", prefix(k))
            };
            if k.len() > MAX_STRING_BYTES {
                return Err(ApiError::bad_request(format!(
                    "{here}: a field name of {} bytes",
                    k.len()
                )));
            }
            if path.is_empty() && k == "model_config" {
                return Ok(());
            }
            short_strings(x, &here)
        }),
        _ => Ok(()),
    }
}

/// Parse a JSON body: 415 unless `application/json` (a cross-site form
/// cannot send that without a preflight), 413 past the body limit, 400
/// for anything after the object, an over-long string, or (with the
/// field path, `scenario.training.batch_tokens: …`) a malformed field.
pub(crate) fn parse<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_json(ct) {
        return Err(ApiError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            message: format!(
                "Content-Type '{}': the API takes application/json",
                prefix(ct)
            ),
        });
    }
    let body = body.map_err(|r| ApiError {
        status: r.status(),
        message: match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => format!(
                "request body over {} bytes (a scenario and a config.json are far smaller)",
                crate::MAX_BODY_BYTES
            ),
            _ => r.body_text(),
        },
    })?;
    // serde would also read a struct from an array; the API documents objects
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request(
            "request body: expected a JSON object like {\"scenario\": {\"model\": {\"name\": …}}}",
        ));
    }
    // one JSON value and nothing after it (serde_json's `from_slice` checks
    // the end; a streaming deserializer alone would not)
    let whole: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    short_strings(&whole, "")?;
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ApiError::bad_request(format!("request body: {inner}"))
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    })
}

/// Resolve a request's scenario: with a pasted config.json, a copy of the
/// catalog holding that model, named as the scenario's model; no model at
/// all is refused as the CLI refuses it. Files are never read on a
/// request's behalf, so a `[model] file` is refused too.
fn resolve<'c>(
    cat: &'c Catalog,
    scenario: &Scenario,
    model_config: Option<&str>,
) -> Result<Resolved<'c>, ApiError> {
    let mut sc = scenario.clone();
    if let Some(f) = &sc.model.file {
        return Err(ApiError::bad_request(format!(
            "scenario.model.file = \"{}\": the web API reads no files; paste the config.json as model_config",
            prefix(f)
        )));
    }
    let cat = match model_config {
        None => Cow::Borrowed(cat),
        Some(text) => {
            let mut cat = cat.clone();
            let mut no_files = |p: &str| Err(format!("the web API reads no files ('{p}')"));
            let (name, _) = meshplan_core::scenario::add_model_file_with(
                &mut cat,
                text,
                "config.json",
                &mut no_files,
            )?;
            sc.model.name = Some(name);
            Cow::Owned(cat)
        }
    };
    sc.require_model("set scenario.model.name (a catalog model) or paste a config.json")
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((sc, cat))
}

/// The SLOs a request carries, for the core's one check.
pub(crate) fn slos(ttft: &Option<SloValue>, tpot: &Option<SloValue>) -> Slos {
    Slos {
        ttft_slo: ttft.clone(),
        tpot_slo: tpot.clone(),
    }
}

impl EvalRequest {
    /// The scenario and catalog to evaluate.
    pub(crate) fn resolve<'c>(&self, cat: &'c Catalog) -> Result<Resolved<'c>, ApiError> {
        resolve(cat, &self.scenario, self.model_config.as_deref())
    }

    /// Refuse the SLOs on `/api/train` (they draw on the serving plot only).
    pub(crate) fn no_slos(&self) -> Result<(), ApiError> {
        if self.ttft_slo.is_some() || self.tpot_slo.is_some() {
            return Err(ApiError::bad_request(
                "ttft_slo and tpot_slo are serving options (/api/infer, /api/plan/infer)",
            ));
        }
        Ok(())
    }
}

impl PlanRequest {
    /// The scenario and catalog to search.
    pub(crate) fn resolve<'c>(&self, cat: &'c Catalog) -> Result<Resolved<'c>, ApiError> {
        resolve(cat, &self.scenario, self.model_config.as_deref())
    }

    /// Plans to list: `top`, default 10 as in the CLI, at most [`MAX_TOP`]
    /// (a page does not show more, and each costs a row of JSON).
    pub(crate) fn top(&self) -> Result<usize, ApiError> {
        match self.top.unwrap_or(10) {
            t if t > MAX_TOP => Err(too_many_plans(t)),
            t => Ok(t),
        }
    }
}

/// Refuse a listing of `top` plans, over [`MAX_TOP`].
pub(crate) fn too_many_plans(top: usize) -> ApiError {
    ApiError::bad_request(format!(
        "top = {top}: the web API lists at most {MAX_TOP} plans (the CLI has no limit)"
    ))
}

/// Refuse a search over more than [`MAX_SEARCH_CHIPS`] chips.
pub(crate) fn too_many_chips(n: u64) -> Result<(), ApiError> {
    if n > MAX_SEARCH_CHIPS {
        return Err(ApiError::bad_request(format!(
            "{n} chips: the web API searches at most {MAX_SEARCH_CHIPS} chips (use `meshplan plan` for more)"
        )));
    }
    Ok(())
}
