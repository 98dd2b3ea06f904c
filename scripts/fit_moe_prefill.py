#!/usr/bin/env python3
"""Fit the routed-expert (fused MoE) kernel at prefill token counts.

Model, per MoE layer and per rank (tp-way sliced experts, ep-way spread):
    t = w_r/(W_hbm*eta_hbm) + F/(C*eta_moe) + A*s_act/W_hbm
  w_r  = 3*D*I*E/(tp*ep) * bytes_w      routed weights the rank reads once
  F    = 6*T*k*D*I/(tp*ep)              routed FLOPs of the rank
  A    = T*k*D/ep                       routed activation elements the rank
                                        gathers, writes and sums (a TP
                                        slice does not shrink them)
eta_hbm = 0.84 is the engine profile's weight-streaming efficiency (fixed);
eta_moe and s_act are fitted by relative least squares (linear in 1/eta_moe
and s_act) on the engine's measured fused-MoE table (aiconfigurator systems
data, commit 095f58a, <system>/moe/<engine>/<version>, power_law_1.01
routing, ep = 1, T >= 1024 tokens: the prefill range; T <= 256 is the decode
curve of data/engines/kernels.toml). Prints the fit, its median/p90 |error|,
and the error of the same fractions of peak on the H200 table (held out).

Usage: python3 scripts/fit_moe_prefill.py ENGINE DTYPE SYSTEM:VERSION [HELD_OUT_SYSTEM:VERSION ...]
  e.g. python3 scripts/fit_moe_prefill.py sglang fp8_block h100_sxm:0.5.14 h200_sxm:0.5.14
"""
import math
import sys

import pyarrow.parquet as pq

ROOT = "/work/shared/microbench/aiconfigurator"
# W_hbm and the dense fp8 / bf16 peaks of each system (data/hardware)
HBM = {"h100_sxm": 3.35e12, "h200_sxm": 4.8e12, "b200_sxm": 8e12, "gb200": 8e12}
FP8 = {"h100_sxm": 1979e12, "h200_sxm": 1979e12, "b200_sxm": 4.5e15, "gb200": 5e15}
BF16 = {"h100_sxm": 989.5e12, "h200_sxm": 989.5e12, "b200_sxm": 2.25e15, "gb200": 2.5e15}
BYTES = {"fp8_block": 1, "fp8": 1, "bfloat16": 2}
ETA_HBM = 0.84


def rows(system, engine, version, dtype):
    path = f"{ROOT}/{system}/moe/{engine}/{version}/moe_perf.parquet"
    w = HBM[system]
    peak = BF16[system] if dtype == "bfloat16" else FP8[system]
    out = []
    for r in pq.read_table(path).to_pylist():
        if (r["moe_dtype"], r["distribution"], r["moe_ep_size"]) != (dtype, "power_law_1.01", 1):
            continue
        t, d, i, e, k, tp = (r[c] for c in ("num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size"))
        if t < 1024 or i % tp:
            continue
        weights = 3 * d * i * e / tp * BYTES[dtype] / (w * ETA_HBM)
        flops = 6 * t * k * d * i / tp / peak
        act = t * k * d / w
        out.append((flops, act, weights, r["latency"] * 1e-3, (t, d, i, e, k, tp)))
    return out


def fit(rs):
    # relative least squares on (latency - weights) = flops/eta + act*s
    a11 = sum((f / y) ** 2 for f, a, wt, y, _ in rs)
    a12 = sum(f * a / y**2 for f, a, wt, y, _ in rs)
    a22 = sum((a / y) ** 2 for f, a, wt, y, _ in rs)
    b1 = sum(f * (y - wt) / y**2 for f, a, wt, y, _ in rs)
    b2 = sum(a * (y - wt) / y**2 for f, a, wt, y, _ in rs)
    det = a11 * a22 - a12 * a12
    inv_eta = (b1 * a22 - b2 * a12) / det
    s = (a11 * b2 - a12 * b1) / det
    return 1.0 / inv_eta, s


def errors(rs, eta, s):
    e = sorted(abs(math.log((wt + f / eta + a * s) / y)) for f, a, wt, y, _ in rs)
    return math.exp(e[len(e) // 2]) - 1, math.exp(e[int(0.9 * len(e))]) - 1


def main():
    engine, dtype = sys.argv[1:3]
    system, version = sys.argv[3].split(":")
    rs = rows(system, engine, version, dtype)
    eta, s = fit(rs)
    med, p90 = errors(rs, eta, s)
    print(f"{engine} {version} {dtype} {system}: {len(rs)} rows, eta_moe = {eta:.3f}, s_act = {s:.2f} B, median |error| {med:.1%}, p90 {p90:.1%}")
    for other in sys.argv[4:]:
        osys, over = other.split(":")
        held = rows(osys, engine, over, dtype)
        med, p90 = errors(held, eta, s)
        print(f"  held out {osys}/{over}: {len(held)} rows, median |error| {med:.1%}, p90 {p90:.1%}")
    for f, a, wt, y, key in rs:
        if key[1:5] == (7168, 2048, 256, 8) and key[0] in (1024, 8192):
            print(f"  T={key[0]} tp={key[5]}: measured {y * 1e3:.3f} ms, fitted {(wt + f / eta + a * s) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
