#!/usr/bin/env python3
"""Fit meshplan's decode kernel curves (data/engines/kernels.toml) from NVIDIA's
measured per-operation tables (aiconfigurator systems data, commit 095f58a,
copied under ../shared/microbench/aiconfigurator; see its README).

Each curve is a few parameters of a physical form, fitted per system (chip) and
engine (the newest collected version), never a copy of a table:

  gemm.<dtype>   t = t0 + N·K·b_w / BW                  decode GEMMs (M ≤ 16), weights streamed once
  moe.<dtype>    t = t0 + E_touched·3·h·i·b_w / BW      grouped GEMM of one MoE layer, M ≤ 256 tokens,
                                                         E_touched = (E/ep)·(1 − (1 − k/E)^T),
                                                         power_law_1.01 routing (expert load imbalance)
  attention      t = t0 + B·t_seq + KV_bytes / BW        paged generation attention (GQA, bf16 KV)
  mla            t = t0 + B·t_seq + max(KV/BW, F/C)      generation MLA (latent KV 576 per token),
                                                         F = B·S·heads·2·(576 + 512)
  mla_module.<gemm>/<kv>
                 t = t0 + B·t_seq + (w_attn(h) + KV) / BW
                                                         the whole generation MLA module of one layer
                                                         (DeepSeek-V3: q_a/kv_a projections, norms, RoPE,
                                                         q_b, the absorbed W_UK/W_UV BMMs, the attention
                                                         kernel, o_proj, each with its activation quant):
                                                         h ≤ 32 heads per GPU (a TP ≥ 4 share), B ≤ 256,
                                                         S ≤ 16k; w_attn(h) the layer's attention weights
                                                         at h heads, KV = B·S·576·b_kv
  allreduce.<n>  t = t0 + bytes / BW  (≤ 128 KiB),  t0' + bytes / BW'  (above; ≤ 8 MiB)
                 the engine's custom all-reduce (fastest implementation per size), n GPUs
  alltoall.<n>   the same two lines up to 64 MiB: NCCL all-to-all, n GPUs (EP dispatch/combine)

Fits minimise the relative (squared) error. Each row of the output carries
its source string, the number of points, and the median and 90th-percentile
relative error of the fit over them.

Usage:  python3 scripts/fit_kernels.py [MICROBENCH_DIR] > data/engines/kernels.toml
Needs pyarrow (script only; meshplan's build never reads parquet).
"""

import os
import statistics
import sys

import pyarrow.parquet as pq

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "microbench", "aiconfigurator")
COMMIT = "095f58a"
# catalog HBM peak per system (data/hardware/*.toml), B/s: a fit above it is not physical
# (a kernel switch inside the fitted range) and is dropped
PEAK_HBM = {"h100_sxm": 3.35e12, "h200_sxm": 4.8e12, "b200_sxm": 8e12, "gb200": 8e12, "a100_sxm": 2.039e12}
# catalog dense bf16 peak per system, FLOP/s (a fitted compute side is stated against it)
PEAK_BF16 = {"h100_sxm": 989.5e12, "h200_sxm": 989.5e12, "b200_sxm": 2.25e15, "gb200": 2.5e15, "a100_sxm": 312e12}
SYSTEMS = {  # aiconfigurator system -> meshplan chip names the curves serve
    "h100_sxm": ["h100"],
    "h200_sxm": ["h200"],
    "b200_sxm": ["b200"],
    "gb200": ["gb200-nvl72"],
    "a100_sxm": ["a100-80gb"],
}
ENGINES = ["trtllm", "vllm", "sglang"]
SPLIT_BYTES = 128 * 1024  # collectives: the small-message line up to here, the large one above
BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "int4_wo": 0.5,
         "int8_wo": 1.0, "w4a16_mxfp4": 0.5, "w4a8_mxfp4_mxfp8": 0.5}
NAME = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4",
        "int4_wo": "int4_wo", "int8_wo": "int8_wo", "w4a16_mxfp4": "mxfp4_w4a16",
        "w4a8_mxfp4_mxfp8": "mxfp4_w4a8"}


def rows(path, cols=None):
    t = pq.read_table(path, columns=cols).to_pydict()
    keys = list(t)
    return [{k: t[k][i] for k in keys} for i in range(len(t[keys[0]]))]


def solve(a, b):
    """Gaussian elimination with partial pivoting (a small dense system)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def wls(xs, ys):
    """y ≈ Σ_j c_j·x_j minimising Σ ((y − ŷ)/y)²; xs: list of regressor tuples."""
    k = len(xs[0])
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for x, y in zip(xs, ys):
        w = 1.0 / (y * y)
        for i in range(k):
            b[i] += w * x[i] * y
            for j in range(k):
                a[i][j] += w * x[i] * x[j]
    return solve(a, b)


def errors(pred, ys):
    e = sorted(abs(p / y - 1.0) for p, y in zip(pred, ys))
    return statistics.median(e), e[int(0.9 * (len(e) - 1))]


def latest(system, op, engine):
    d = os.path.join(ROOT, system, op, engine)
    if not os.path.isdir(d):
        return None
    vs = sorted(os.listdir(d), key=lambda v: [int(x) if x.isdigit() else x
                                              for x in v.replace("rc", ".").split(".")])
    return vs[-1] if vs else None


def src(system, op, engine, version, detail):
    return f"aiconfigurator systems data, commit {COMMIT}, {system}/{op}/{engine}/{version} ({detail})"


def emit(out, system, engine, op, key, t0, bw, n, err, source, **extra):
    if not (t0 == t0 and bw > 0 and t0 > -1e-6):
        return
    if op in ("gemm", "moe", "attention", "mla", "mla_module") and bw > PEAK_HBM[system]:
        return
    if op in ("gemm", "moe", "attention", "mla", "mla_module"):
        extra["peak_bandwidth"] = PEAK_HBM[system]
    if extra.get("flops"):
        extra["peak_bf16_flops"] = PEAK_BF16[system]
    out.append(dict(engine=engine, system=system, chips=SYSTEMS[system], op=op, key=key,
                    t0_s=max(t0, 0.0), bandwidth=bw, points=n, median_error=err[0],
                    p90_error=err[1], source=source, **extra))


def fit_gemm(system, engine, out):
    v = latest(system, "gemm", engine)
    if not v:
        return
    data = rows(os.path.join(ROOT, system, "gemm", engine, v, "gemm_perf.parquet"),
                ["gemm_dtype", "m", "n", "k", "latency"])
    for dt in sorted({r["gemm_dtype"] for r in data}):
        if dt not in BYTES:
            continue
        s = [r for r in data if r["gemm_dtype"] == dt and r["m"] <= 16 and r["n"] * r["k"] >= 4096 * 4096]
        if len(s) < 20:
            continue
        xs = [(1.0, r["n"] * r["k"] * BYTES[dt]) for r in s]
        ys = [r["latency"] * 1e-3 for r in s]
        t0, inv = wls(xs, ys)
        err = errors([t0 + x[1] * inv for x in xs], ys)
        extra = {}
        detail = f"gemm_perf, {dt}, m <= 16, n*k >= 4096^2"
        if dt.endswith("_wo"):
            # weight-only kernels dequantise in the main loop: their compute side
            # 2·M·N·K/F binds from M ≈ 32; F = median over m in 64..128 of the rows'
            # FLOPs over the time left after t0 + the weight stream
            rates = []
            for r in data:
                if r["gemm_dtype"] == dt and 64 <= r["m"] <= 128 and r["n"] * r["k"] >= 4096 * 4096:
                    left = r["latency"] * 1e-3 - t0
                    if left > 0:
                        rates.append(2.0 * r["m"] * r["n"] * r["k"] / left)
            if rates:
                extra["flops"] = statistics.median(rates)
                detail += "; compute side: median over 64 <= m <= 128"
        emit(out, system, engine, "gemm", NAME[dt], t0, 1.0 / inv, len(s), err,
             src(system, "gemm", engine, v, detail), **extra)


def touched(t, e, k, ep):
    return (e / ep) * (1.0 - (1.0 - min(k / e, 1.0)) ** t)


def fit_moe(system, engine, out):
    v = latest(system, "moe", engine)
    if not v:
        return
    p = os.path.join(ROOT, system, "moe", engine, v, "moe_perf.parquet")
    if not os.path.exists(p):
        return
    data = rows(p, ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                    "moe_tp_size", "moe_ep_size", "distribution", "latency", "kernel_source"])
    for dt in sorted({r["moe_dtype"] for r in data}):
        s = [r for r in data if r["moe_dtype"] == dt and r["distribution"] == "power_law_1.01"
             and r["num_tokens"] <= 256 and "nongated" not in r["kernel_source"]]
        if len(s) < 20 or dt not in BYTES:
            continue
        xs, ys = [], []
        for r in s:
            per_expert = 3.0 * r["hidden_size"] * r["inter_size"] / r["moe_tp_size"] * BYTES[dt]
            xs.append((1.0, touched(r["num_tokens"], r["num_experts"], r["topk"], r["moe_ep_size"]) * per_expert))
            ys.append(r["latency"] * 1e-3)
        t0, inv = wls(xs, ys)
        err = errors([t0 + x[1] * inv for x in xs], ys)
        emit(out, system, engine, "moe", NAME[dt], t0, 1.0 / inv, len(s), err,
             src(system, "moe", engine, v, f"moe_perf, {dt}, power_law_1.01, num_tokens <= 256"))


def fit_attention(system, engine, out):
    v = latest(system, "attention", engine)
    if not v:
        return
    data = rows(os.path.join(ROOT, system, "attention", engine, v, "generation_attention_perf.parquet"))
    s = [r for r in data if r.get("window_size", 0) == 0 and r["kv_cache_dtype"] == "bfloat16"
         and r["num_heads"] <= 64 and r["num_heads"] // max(r["num_key_value_heads"], 1) in (1, 2, 4, 8, 16)
         and r["head_dim"] == 128]
    if len(s) < 20:
        return
    xs, ys = [], []
    for r in s:
        kv = r["batch_size"] * (r["step"] + 1) * 2 * r["num_key_value_heads"] * r["head_dim"] * 2.0
        xs.append((1.0, float(r["batch_size"]), kv))
        ys.append(r["latency"] * 1e-3)
    t0, tseq, inv = wls(xs, ys)
    err = errors([t0 + x[1] * tseq + x[2] * inv for x in xs], ys)
    emit(out, system, engine, "attention", "bf16", t0, 1.0 / inv, len(s), err,
         src(system, "attention", engine, v, "generation_attention_perf, bf16 KV, head_dim 128, no window"),
         per_seq_s=max(tseq, 0.0))


def fit_mla(system, engine, out):
    v = latest(system, "mla", engine)
    p = v and os.path.join(ROOT, system, "mla", engine, v, "generation_mla_perf.parquet")
    if not p or not os.path.exists(p):
        return
    data = rows(p)
    for kvdt in ("fp8", "bfloat16"):
        b = BYTES[kvdt]
        mem = [r for r in data if r["kv_cache_dtype"] == kvdt and r["num_heads"] <= 16]
        if len(mem) < 20:
            continue
        xs, ys = [], []
        for r in mem:
            xs.append((1.0, float(r["batch_size"]), r["batch_size"] * (r["step"] + 1) * 576 * b))
            ys.append(r["latency"] * 1e-3)
        t0, tseq, inv = wls(xs, ys)
        bw = 1.0 / inv
        # compute side from the 128-head rows whose memory time is a small part
        comp = [r for r in data if r["kv_cache_dtype"] == kvdt and r["num_heads"] == 128
                and r["batch_size"] * (r["step"] + 1) >= 64 * 1024]
        rates = []
        for r in comp:
            f = r["batch_size"] * (r["step"] + 1) * r["num_heads"] * 2.0 * (576 + 512)
            t = r["latency"] * 1e-3 - t0 - tseq * r["batch_size"]
            if t > 0:
                rates.append(f / t)
        c = statistics.median(rates) if rates else 0.0

        def pred(r):
            kv = r["batch_size"] * (r["step"] + 1) * 576 * b
            f = r["batch_size"] * (r["step"] + 1) * r["num_heads"] * 2.0 * (576 + 512)
            return t0 + tseq * r["batch_size"] + max(kv / bw, f / c if c else 0.0)

        allr = mem + comp
        err = errors([pred(r) for r in allr], [r["latency"] * 1e-3 for r in allr])
        emit(out, system, engine, "mla", NAME[kvdt], t0, bw, len(allr), err,
             src(system, "mla", engine, v, f"generation_mla_perf, {kvdt} KV, heads <= 16 (memory) and 128 (compute)"),
             per_seq_s=max(tseq, 0.0), flops=c)


# DeepSeek-V3's MLA dims (the module table's only model): D, q_lora_rank,
# kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim
MLA_DIMS = (7168, 1536, 512, 64, 128, 128)


def mla_weight_elems(h):
    """Attention weights of one MLA layer for h heads per GPU: the latent
    projections D·(q_r + kv_r + rope) (replicated under TP), q_b q_r·h·(nope + rope),
    kv_b kv_r·h·(nope + v), o_proj h·v·D."""
    d, qr, kr, rope, nope, v = MLA_DIMS
    return d * (qr + kr + rope) + qr * h * (nope + rope) + kr * h * (nope + v) + h * v * d


def fit_mla_module(system, engine, out):
    v = latest(system, "mla", engine)
    p = v and os.path.join(ROOT, system, "mla", engine, v, "mla_generation_module_perf.parquet")
    if not p or not os.path.exists(p):
        return
    data = rows(p, ["gemm_type", "kv_cache_dtype", "num_heads", "batch_size", "step", "latency"])
    for gdt in ("fp8_block", "bfloat16"):
        for kvdt in ("bfloat16", "fp8"):
            s = [r for r in data if r["gemm_type"] == gdt and r["kv_cache_dtype"] == kvdt
                 and r["num_heads"] <= 32 and r["batch_size"] <= 256 and r["step"] <= 16384]
            if len(s) < 20:
                continue
            xs = [(1.0, float(r["batch_size"]),
                   mla_weight_elems(r["num_heads"]) * BYTES[gdt]
                   + r["batch_size"] * (r["step"] + 1) * 576 * BYTES[kvdt]) for r in s]
            ys = [r["latency"] * 1e-3 for r in s]
            t0, tseq, inv = wls(xs, ys)
            err = errors([t0 + x[1] * tseq + x[2] * inv for x in xs], ys)
            emit(out, system, engine, "mla_module", f"{NAME[gdt]}/{NAME[kvdt]}", t0, 1.0 / inv, len(s), err,
                 src(system, "mla", engine, v,
                     f"mla_generation_module_perf, DeepSeek-V3, {gdt} GEMMs, {kvdt} KV, "
                     "heads <= 32, batch <= 256, isl <= 16k"),
                 per_seq_s=max(tseq, 0.0))


def fit_line(system, engine, op, key_prefix, p, version, detail_of, select, out, max_bytes):
    if not os.path.exists(p):
        return
    best = {}  # the engine picks its fastest implementation per message
    for r in rows(p):
        if select(r) and r["message_size"] * 2 <= max_bytes:
            k = (r["num_gpus"], r["message_size"])
            if k not in best or r["latency"] < best[k]["latency"]:
                best[k] = r
    data = list(best.values())
    for n in sorted({r["num_gpus"] for r in data}):
        s = [r for r in data if r["num_gpus"] == n]
        if len(s) < 5:
            continue
        # two lines: the latency-bound one-shot regime up to SPLIT bytes, the
        # bandwidth regime above (the kernels switch algorithm in between)
        lo = [r for r in s if r["message_size"] * 2 <= SPLIT_BYTES]
        hi = [r for r in s if r["message_size"] * 2 > SPLIT_BYTES]
        if len(lo) < 3 or len(hi) < 3:
            continue
        fits = []
        for part in (lo, hi):
            xs = [(1.0, r["message_size"] * 2.0) for r in part]  # bf16 elements -> bytes
            ys = [r["latency"] * 1e-3 for r in part]
            fits.append(wls(xs, ys))
        (t0, inv), (t1, inv1) = fits

        def pred(r):
            v = r["message_size"] * 2.0
            return t0 + v * inv if v <= SPLIT_BYTES else t1 + v * inv1

        err = errors([pred(r) for r in s], [r["latency"] * 1e-3 for r in s])
        if inv1 <= 0 or t1 != t1:
            continue
        emit(out, system, engine, op, f"{key_prefix}{n}", t0, 1.0 / inv, len(s), err,
             src(system, "comm", engine, version, detail_of(n)), gpus=n,
             split_bytes=float(SPLIT_BYTES), t0_large_s=max(t1, 0.0), bandwidth_large=1.0 / inv1)


def fit_comm(system, engine, out):
    v = latest(system, "comm", engine)
    if v:
        p = os.path.join(ROOT, system, "comm", engine, v, "custom_allreduce_perf.parquet")
        fit_line(system, engine, "allreduce", "", p, v,
                 lambda n: f"custom_allreduce_perf, bf16, {n} GPUs, <= 8 MiB, fastest implementation per size",
                 lambda r: r["allreduce_dtype"] == "bfloat16", out, 8 * 2**20)
    nv = latest(system, "comm", "nccl")
    if nv:
        p = os.path.join(ROOT, system, "comm", "nccl", nv, "nccl_perf.parquet")
        fit_line(system, "nccl", "alltoall", "", p, nv,
                 lambda n: f"nccl_perf alltoall, bf16, {n} GPUs, <= 64 MiB",
                 lambda r: r["op_name"] == "alltoall" and r["nccl_dtype"] in ("bfloat16", "half"),
                 out, 64 * 2**20)


def toml_value(x):
    if isinstance(x, str):
        return '"' + x.replace('"', '\\"') + '"'
    if isinstance(x, list):
        return "[" + ", ".join(toml_value(v) for v in x) + "]"
    if isinstance(x, int):
        return str(x)
    return f"{x:.4g}"


def main():
    out = []
    for system in SYSTEMS:
        for engine in ENGINES:
            fit_gemm(system, engine, out)
            fit_moe(system, engine, out)
            fit_attention(system, engine, out)
            fit_mla(system, engine, out)
            fit_mla_module(system, engine, out)
            fit_comm(system, engine, out)
    seen = set()
    print("# Decode kernel curves fitted by scripts/fit_kernels.py from NVIDIA's measured")
    print("# per-operation tables (aiconfigurator systems data, commit 095f58a; see that")
    print("# script for each form). Generated: do not edit by hand. t = t0_s + bytes/bandwidth")
    print("# (+ per_seq_s·B, + FLOPs/flops for MLA). median_error/p90_error: relative error")
    print("# of the fit over its points (in-sample).")
    for c in out:
        k = (c["engine"], c["system"], c["op"], c["key"])
        if k in seen:
            continue
        seen.add(k)
        print()
        print("[[curve]]")
        for f in ("engine", "system", "chips", "op", "key", "t0_s", "bandwidth", "peak_bandwidth", "per_seq_s", "flops", "peak_bf16_flops",
                  "gpus", "split_bytes", "t0_large_s", "bandwidth_large", "points", "median_error", "p90_error", "source"):
            if f in c:
                print(f"{f} = {toml_value(c[f])}")


if __name__ == "__main__":
    main()
