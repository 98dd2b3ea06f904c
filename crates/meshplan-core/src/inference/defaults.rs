//! The serving defaults: what `meshplan infer` and `meshplan plan infer`
//! assume when a request leaves a value out, in one place, so the CLI, the
//! web API, the Python package and both commands agree (issue 22).

/// Prompt tokens of a request (the book's ch. 7 examples use 2,048-token
/// prompts); `infer` with a context but no prompt takes min(context, this).
pub const PROMPT_LEN: u64 = 2048;

/// Tokens generated per request.
pub const GEN_LEN: u64 = 512;

/// Concurrent sequences per replica of one `infer` evaluation.
pub const BATCH: u64 = 1;

/// Prefill MFU: 1, the roofline.
pub const MFU: f64 = 1.0;

/// Plans `plan infer` lists (`--top`, `top=`).
pub const PLAN_TOP: usize = 10;

/// Largest batch per replica the serving search tries (a cap on top of the
/// largest batch whose KV cache fits).
pub const PLAN_MAX_BATCH: u64 = 1 << 14;
