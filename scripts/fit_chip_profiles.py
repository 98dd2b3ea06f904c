#!/usr/bin/env python3
"""Fit the microbenchmark-level curves of the chip profiles (data/profiles/*.toml,
`[curves]`) from the aiconfigurator systems data (NVIDIA ai-dynamo/aiconfigurator,
commit 095f58a, `aic-core/src/aiconfigurator_core/systems/data/`), and print the
fitted figures with their sources. Nothing here is needed by the Rust build or CI:
it documents how the committed figures were obtained, and re-running it must print
them again.

    python3 scripts/fit_chip_profiles.py [MICROBENCH_DIR]

MICROBENCH_DIR defaults to ../shared/microbench/aiconfigurator (a copy of that
directory; see its README). Needs pyarrow.

Fits, per system, on the newest collected version of one engine's tables:

* GEMM (`gemm_perf`, one fit per dtype): the calibrated pricer's form
  e(m, n, k) = e_max * (x / ceil128(x)) * x / (x + x_half), x = min(m, n, k)
  (crates/meshplan-core/src/step/calibrated.rs `gemm_efficiency`), least squares
  of ln(efficiency) with each row weighted by its measured time, e_max in closed
  form per x_half and x_half on [0, 1024], over the training shapes (m, n, k >= 512) (log grid + golden section): the same
  fit as `meshplan calibrate --gemm` (fidelity/microbench/gemm.rs).
* Attention (`context_attention_perf`, bf16, prefill = causal forward): the
  FLOP-weighted efficiency sum(FLOPs) / (bf16 peak * sum(time)) over the rows with
  at least 1,024 tokens per sequence, FLOPs = 4 * b * s * heads * d * (s/2)
  (causal: half the score matrix), head_dim 128 (fidelity/microbench/attention.rs).
* Grouped GEMM (`moe_perf`, MoE experts, balanced routing; one fit per dtype:
  bf16, fp8, fp8_block): the same form with x = min(M, inter/tp, hidden), M =
  tokens * top-k / experts rows per expert (>= 128: training micro-batches), the
  efficiency of both (gated: three) expert matrices over the fused layer's time;
  the first engine with rows of the dtype among trtllm (CUTLASS grouped GEMM, the
  kernel family of Transformer Engine / Megatron-Core), sglang, vllm.
* Committed to data/profiles: every curve whose rms log residual is at most
  70 %; the others (printed here) are left out, and the pricer falls back to the
  dense GEMM curve (grouped) or to the pricing without recipes (fp8_block).
* NCCL (`nccl_perf`, bf16, in one node): per collective and GPU count the
  alpha-beta fit t = alpha + bus_bytes / beta over the messages >= 1 MiB for beta
  and the smallest message for alpha, bus bytes = 2(n-1)/n * size (all-reduce),
  (n-1)/n * size (all-gather, reduce-scatter, all-to-all) as nccl-tests reports.
"""

import math
import os
import sys

import pyarrow.parquet as pq

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "microbench", "aiconfigurator")
COMMIT = "aiconfigurator systems data, commit 095f58a"

# (profile, system, engine/version, bf16 peak TFLOP/s and fp8/fp4 peaks of the
# catalog entry data/hardware/<profile>.toml [compute], NVLink one-way GB/s)
SYSTEMS = [
    ("a100-80gb", "a100_sxm", "vllm/0.14.0", {"bf16": 312.0}, 300.0),
    ("h100", "h100_sxm", "vllm/0.24.0", {"bf16": 989.5, "fp8": 1979.0}, 450.0),
    ("h200", "h200_sxm", "vllm/0.24.0", {"bf16": 989.5, "fp8": 1979.0}, 450.0),
    ("b200", "b200_sxm", "vllm/0.24.0", {"bf16": 2250.0, "fp8": 4500.0, "fp4": 9000.0}, 900.0),
    ("gb200-nvl72", "gb200", "vllm/0.24.0", {"bf16": 2500.0, "fp8": 5000.0, "fp4": 10000.0}, 900.0),
]
# Training shapes only: tokens per micro-batch and hidden / tp are >= 512 in
# every run meshplan is validated on; the tables' decode shapes (m < 512) are
# bound by launch and weight reads, which the serving model prices separately.
MIN_TRAINING_DIM = 512
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4"}
# the fp8 peak of each dtype the tables name (fp8_block: the same tensor cores,
# DeepSeek-style 1x128 / 128x128 scales)
PEAK_OF = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4"}


def newest(path):
    """The directory of the newest version under `path` (versions sort as tuples)."""
    def key(v):
        return [int(x) if x.isdigit() else 0 for x in v.replace("rc", ".").split(".")]
    vs = sorted(os.listdir(path), key=key)
    return os.path.join(path, vs[-1]), vs[-1]


def shape(m, n, k, h):
    x = max(min(m, n, k), 1.0)
    return x / (math.ceil(x / 128.0) * 128.0) * x / (x + h)


def fit_gemm(rows, peak):
    pts = [(r["latency"] * 1e-3, r["m"], r["n"], r["k"],
            2.0 * r["m"] * r["n"] * r["k"] / (r["latency"] * 1e-3 * peak * 1e12)) for r in rows]
    return fit_points(pts)


def fit_points(pts):
    """(e_max, x_half, rms log residual, points) of the pricer's form over
    (time, m, n, k, efficiency) points, time-weighted."""
    w = sum(p[0] for p in pts)

    def at(h):
        logs = [(t, math.log(e) - math.log(shape(m, n, k, h))) for t, m, n, k, e in pts]
        mean = sum(t * l for t, l in logs) / w
        return mean, sum(t * (l - mean) ** 2 for t, l in logs) / w

    grid = [0.0] + [1e-2 * (1024.0 / 1e-2) ** (i / 200.0) for i in range(201)]
    sse = [at(h)[1] for h in grid]
    b = min(range(len(grid)), key=lambda i: sse[i])
    lo, hi = grid[max(b - 1, 0)], grid[min(b + 1, len(grid) - 1)]
    phi = (5 ** 0.5 - 1) / 2
    for _ in range(80):
        a, c = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if at(a)[1] <= at(c)[1]:
            hi = c
        else:
            lo = a
    h = min([grid[b], 0.5 * (lo + hi)], key=lambda x: at(x)[1])
    ln_e, s = at(h)
    return math.exp(ln_e), h, math.sqrt(s), len(pts)


def gemm(profile, system, engine, peaks):
    d, ver = newest(os.path.join(ROOT, system, "gemm", engine.split("/")[0]))
    rows = pq.read_table(os.path.join(d, "gemm_perf.parquet")).to_pylist()
    for raw, dt in DTYPES.items():
        sel = [r for r in rows if r["gemm_dtype"] == raw and r["latency"] > 0
               and min(r["m"], r["n"], r["k"]) >= MIN_TRAINING_DIM]
        if not sel or PEAK_OF[dt] not in peaks:
            continue
        e, h, rms, n = fit_gemm(sel, peaks[PEAK_OF[dt]])
        big = [r for r in sel if r["m"] == 8192 and r["n"] == 8192 and r["k"] == 8192]
        note = ""
        if big:
            t = big[0]["latency"]
            tf = 2 * 8192 ** 3 / (t * 1e-3) / 1e12
            pk = peaks[PEAK_OF[dt]]
            note = f"; 8192^3 {t:.3f} ms = {tf:.0f} TFLOP/s = {tf / pk:.3f} of {pk:g}"
        print(f'{profile} gemm {dt}: efficiency = {e:.4f}, half_dim = {h:.1f}  # "{COMMIT}, '
              f'{system}/gemm/{engine.split("/")[0]}/{ver} ({n} {dt} GEMMs with m, n, k >= {MIN_TRAINING_DIM}; time-weighted least squares '
              f'of ln efficiency on e_max*(x/ceil128(x))*x/(x+x_half), x = min(m,n,k)): rms log residual '
              f'{100 * rms:.1f} %{note}"')


def attention(profile, system, engine, peaks):
    d, ver = newest(os.path.join(ROOT, system, "attention", engine.split("/")[0]))
    rows = pq.read_table(os.path.join(d, "context_attention_perf.parquet")).to_pylist()
    sel = [r for r in rows if r["isl"] >= 1024 and r["head_dim"] == 128
           and str(r["attn_dtype"]).lower() in ("bfloat16", "float16", "bf16", "fp16")
           and r.get("window_size", 0) == 0 and r["latency"] > 0]
    if not sel:
        return
    fl = sum(4.0 * r["batch_size"] * r["isl"] * r["num_heads"] * r["head_dim"] * r["isl"] / 2 for r in sel)
    t = sum(r["latency"] * 1e-3 for r in sel)
    e = fl / (peaks["bf16"] * 1e12 * t)
    print(f'{profile} attention: efficiency = {e:.4f}  # "{COMMIT}, {system}/attention/'
          f'{engine.split("/")[0]}/{ver} context_attention_perf ({len(sel)} bf16 causal prefill kernels, '
          f'isl >= 1024, head_dim 128; FLOP-weighted: sum 4*b*s*heads*d*s/2 / (bf16 peak * sum time))"')


MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block"}
# engines in order of preference for the MoE tables: TensorRT-LLM's CUTLASS
# grouped GEMM is the kernel family training frameworks run (Transformer
# Engine / Megatron-Core grouped GEMM); the first engine with balanced rows of
# a dtype is used
MOE_ENGINES = ["trtllm", "sglang", "vllm"]
# per-expert rows of a training micro-batch: >= 128 (tokens * top-k / experts;
# e.g. 4,096 tokens * top-8 / 256 experts), where the launch and permute costs
# of decode-sized layers no longer dominate
MIN_EXPERT_ROWS = 128


def fit_grouped(rows, peak):
    """The pricer's GEMM form fitted on the MoE layers: each expert GEMM is
    [M, hidden] x [hidden, inter/tp] (and back), M = tokens * top-k / experts
    rows per expert (balanced routing), so x = min(M, inter/tp, hidden);
    efficiency = FLOPs of both (gated: three) expert matrices / (peak * time)."""
    pts = []
    for r in rows:
        tp, ep = r["moe_tp_size"], r["moe_ep_size"]
        mats = 2.0 if r["kernel_source"] == "moe_torch_flow_nongated" else 3.0
        fl = 2.0 * mats * r["num_tokens"] * r["topk"] * r["hidden_size"] * r["inter_size"] / (tp * ep)
        t = r["latency"] * 1e-3
        m = r["num_tokens"] * r["topk"] / r["num_experts"]
        pts.append((t, m, r["inter_size"] / tp, r["hidden_size"], fl / (t * peak * 1e12)))
    e, h, rms, n = fit_points(pts)
    return e, h, rms, n, max(p[1] for p in pts)


def grouped(profile, system, peaks):
    """Grouped-GEMM (MoE experts) efficiency vs rows per expert from `moe_perf`
    (balanced routing: every expert gets tokens * top-k / experts rows; the
    kernel time covers both expert GEMMs, the activation and the permutes)."""
    for raw, dt in MOE_DTYPES.items():
        if PEAK_OF[dt] not in peaks:
            continue
        for eng in MOE_ENGINES:
            base = os.path.join(ROOT, system, "moe", eng)
            if not os.path.isdir(base):
                continue
            d, ver = newest(base)
            path = os.path.join(d, "moe_perf.parquet")
            if not os.path.exists(path):
                continue
            rows = [r for r in pq.read_table(path).to_pylist()
                    if r["moe_dtype"] == raw and r["distribution"] == "balanced" and r["latency"] > 0
                    and r["num_tokens"] * r["topk"] / r["num_experts"] >= MIN_EXPERT_ROWS
                    and r["num_experts"] // r["moe_ep_size"] >= 2]
            if not rows:
                continue
            e, h, rms, n, mmax = fit_grouped(rows, peaks[PEAK_OF[dt]])
            print(f'{profile} grouped_gemm {dt}: efficiency = {e:.4f}, half_dim = {h:.1f}, max_rows = {mmax:g}  # "{COMMIT}, '
                  f'{system}/moe/{eng}/{ver} moe_perf ({n} {dt} MoE layers, balanced routing, >= {MIN_EXPERT_ROWS} rows '
                  f'per expert, >= 2 experts per rank; time-weighted least squares of ln efficiency on '
                  f'e_max*(x/ceil128(x))*x/(x+x_half), x = min(M, inter/tp, hidden), M = tokens*top-k/experts, '
                  f'FLOPs = 2*(2 or 3 matrices)*tokens*top-k*hidden*inter/(tp*ep)): '
                  f'rms log residual {100 * rms:.1f} %; measured up to M = {mmax:g}"')
            break


def nccl(profile, system, nvlink):
    d, ver = newest(os.path.join(ROOT, system, "comm", "nccl"))
    rows = pq.read_table(os.path.join(d, "nccl_perf.parquet")).to_pylist()
    by = {}
    for r in rows:
        if str(r["nccl_dtype"]).lower() not in ("bfloat16", "half", "float16", "bf16"):
            continue
        by.setdefault((r["op_name"], r["num_gpus"]), []).append(r)
    for (op, n), rs in sorted(by.items()):
        rs.sort(key=lambda r: r["message_size"])
        f = 2.0 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
        big = [r for r in rs if r["message_size"] * 2 >= 1 << 20]
        if not big:
            continue
        # least squares of t = alpha + f*bytes/beta on the large messages
        xs = [f * r["message_size"] * 2 for r in big]
        ys = [r["latency"] * 1e-3 for r in big]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        beta = 1.0 / slope / 1e9
        alpha = rs[0]["latency"] * 1e-3
        peak_bw = max(f * r["message_size"] * 2 / (r["latency"] * 1e-3) for r in rs) / 1e9
        print(f'{profile} nccl {op} {n} GPUs: busbw = {beta:.1f} GB/s ({beta / nvlink:.3f} of {nvlink:g}), '
              f'best point {peak_bw:.1f} GB/s, alpha = {alpha * 1e6:.1f} us (smallest message '
              f'{rs[0]["message_size"] * 2} B)  # "{COMMIT}, {system}/comm/nccl/{ver} nccl_perf"')


def main():
    for profile, system, engine, peaks, nvlink in SYSTEMS:
        gemm(profile, system, engine, peaks)
        attention(profile, system, engine, peaks)
        grouped(profile, system, peaks)
        nccl(profile, system, nvlink)


if __name__ == "__main__":
    main()
