#!/usr/bin/env python3
"""Fit the engine profiles' small-M GEMM efficiency curve η·M/(M + M½)
(`gemm_efficiency`/`gemm_half_tokens` for bf16, `lowp_gemm_*` for fp8; see
EngineProfile::gemm_efficiency_for) per engine on NVIDIA's measured GEMM tables
(aiconfigurator systems data, commit 095f58a, under ../shared/microbench; see
its README: latency in ms).

Points: the decode-relevant shapes of Llama-class models, N and K both in
{4096, 5120, 6144, 8192, 10240, 12288, 16384} (the table's hidden/FFN/QKV
widths from 4K up; it has no 14336/28672 columns), on h100_sxm, over every
M the table has (1…32768): the decode range M ≤ 512 sets M½, and the large-M
rows pin η (a fit on M ≤ 512 alone cannot separate them: below the ridge the
kernels are weight-load bound and the curve is η/M½·M, which gave η > 1).
Efficiency of a point = 2·M·N·K / (latency · peak) over the catalog's dense
peak (989.5 TFLOP/s bf16, 1979 TFLOP/s fp8): whole kernel times, as the step
model's max(compute, weight load) uses them. The fit is least squares on the
log error over the grid η = 0.005k, M½ = 0…1024 tokens (the grid of
tests/serving_validation.rs `fit_curve`); each shape counts once per M.

The fp8 and fp8_block rows are printed beside the bf16 ones: the profiles'
`lowp_gemm_*` stay the DeepGEMM H800 fit (data/engines/fp8-gemm-h800.csv,
also a kernel microbenchmark); these per-engine fp8 fits are the alternative
(at N = K = 8192 they are 28-38 % low at M = 128-512, p90 error 0.32-0.41).

Usage:  python3 scripts/fit_engine_gemm.py [MICROBENCH_DIR]
Prints, per engine and dtype, η, M½, the median/p90 relative error of the
fitted efficiency over its points, and the source string for the TOML.
Needs pyarrow (script only).
"""

import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from fit_kernels import COMMIT, ROOT, latest, rows  # noqa: E402

SYSTEM = os.environ.get("SYSTEM", "h100_sxm")
# the catalog's dense peaks per measured system (data/hardware/*.toml)
PEAKS = {
    "h100_sxm": {"bfloat16": 989.5e12, "fp8": 1979e12, "fp8_block": 1979e12},
    "h200_sxm": {"bfloat16": 989.5e12, "fp8": 1979e12, "fp8_block": 1979e12},
    "a100_sxm": {"bfloat16": 312e12},
    "b200_sxm": {"bfloat16": 2.25e15, "fp8": 4.5e15, "fp8_block": 4.5e15},
    "gb200": {"bfloat16": 2.5e15, "fp8": 5e15, "fp8_block": 5e15},
}
PEAK = PEAKS[SYSTEM]
WIDTHS = {4096, 5120, 6144, 8192, 10240, 12288, 16384}
M_MAX = 32768


def points(engine, version, dtype):
    path = os.path.join(ROOT, SYSTEM, "gemm", engine, version, "gemm_perf.parquet")
    pts = []
    for r in rows(path, ["gemm_dtype", "m", "n", "k", "latency"]):
        if r["gemm_dtype"] != dtype or r["m"] > M_MAX or r["latency"] <= 0:
            continue
        if r["n"] not in WIDTHS or r["k"] not in WIDTHS:
            continue
        t = r["latency"] * 1e-3
        pts.append((float(r["m"]), 2.0 * r["m"] * r["n"] * r["k"] / (t * PEAK[dtype])))
    return pts


def fit(pts, knee=1.0):
    """Grid least squares of ln(η·M/(M^p + M½^p)^(1/p)) − ln(eff) at knee p:
    η = 0.005k ≤ 1, M½ integer."""
    lm = [math.log(m) for m, _ in pts]
    le = [math.log(e) for _, e in pts]
    best = (math.inf, 0.0, 0.0)
    for h in range(0, 1025):
        # for fixed M½ the best ln η is the mean residual; then snap to the grid
        base = [a - math.log((m**knee + h**knee) ** (1.0 / knee)) for (m, _), a in zip(pts, lm)]
        mean = statistics.fmean(e - b for e, b in zip(le, base))
        k0 = round(math.exp(mean) / 0.005)
        for k in (k0 - 1, k0, k0 + 1):
            if k < 1 or k > 200:  # η ≤ 1: a fraction of the peak
                continue
            le_eta = math.log(0.005 * k)
            err = sum((le_eta + b - e) ** 2 for b, e in zip(base, le))
            if err < best[0] - 1e-12:
                best = (err, 0.005 * k, float(h))
    return best[1], best[2], best[0]


# the knee exponents tried for the 16-bit curves: p = 1 is the additive
# curve η·M/(M + M½) (compute time + weight-read time); larger p sharpen
# the knee toward max(compute, weight read)
KNEES = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]


def curve(eta, half, knee, m):
    return eta * m / ((m**knee + half**knee) ** (1.0 / knee))


def main():
    for engine in ["vllm", "sglang", "trtllm"]:
        version = latest(SYSTEM, "gemm", engine)
        for dtype in ["bfloat16", "fp8", "fp8_block"]:
            if dtype not in PEAK:
                continue
            pts = points(engine, version, dtype)
            if not pts:
                continue
            knees = KNEES if dtype == "bfloat16" else [1.0]
            (eta, half, _), knee = min(((fit(pts, p), p) for p in knees), key=lambda x: x[0][2])
            rel = sorted(abs(curve(eta, half, knee, m) / e - 1.0) for m, e in pts)
            at = {m: curve(eta, half, knee, m) for m in (1, 16, 64, 128, 512, 4096)}
            print(f"{engine:7} {dtype:9} eta = {eta:.3f}  M_half = {half:.0f}  knee = {knee}  "
                  f"points {len(pts)}  median err {statistics.median(rel):.3f}  "
                  f"p90 {rel[int(0.9 * (len(rel) - 1))]:.3f}  "
                  + "  ".join(f"eff({m}) = {v:.4f}" for m, v in at.items()))
            print(f"  source: aiconfigurator systems data, commit {COMMIT}, "
                  f"{SYSTEM}/gemm_perf/{engine}/{version} ({dtype}, N,K in "
                  f"{{4096..16384}}, M = 1..{M_MAX}, {len(pts)} rows)")


if __name__ == "__main__":
    main()
