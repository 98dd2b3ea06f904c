#!/usr/bin/env python3
"""Microbenchmarks of one GPU node for `meshplan calibrate` (docs/fidelity.md,
"Calibration from microbenchmarks").

Writes exactly the files `meshplan calibrate --gemm/--attention/--nccl` reads:

  OUT/gemm.csv                     m,n,k,dtype,time_us     (torch.matmul, bf16; fp8 via torch._scaled_mm where the GPU has it)
  OUT/attention.csv                batch,seq,keys,heads,head_dim,causal,time_us   (forward kernel of
                                   torch.nn.functional.scaled_dot_product_attention, FlashAttention backend)
  OUT/nccl_<op>_<N>nodes.log       nccl-tests stdout layout (all_reduce_perf, all_gather_perf,
                                   reduce_scatter_perf, alltoall_perf) measured with torch.distributed (NCCL)

Usage (one node, about 3-6 minutes on 8 H100):

  python3 scripts/microbench.py compute --out mb/                 # GEMM + attention sweeps on GPU 0
  torchrun --nproc_per_node 8 scripts/microbench.py collectives --out mb/
  meshplan calibrate --chip h100 --gemm mb/gemm.csv --attention mb/attention.csv \\
      --nccl mb/nccl_all_reduce_1nodes.log --nccl mb/nccl_all_gather_1nodes.log \\
      --nccl mb/nccl_reduce_scatter_1nodes.log --nccl mb/nccl_alltoall_1nodes.log --output my-cluster.toml
  meshplan train ... --profile my-cluster.toml

Across nodes (fits the inter-node fields), e.g. 2 nodes:

  torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \\
      scripts/microbench.py collectives --out mb/

nccl-tests instead of torch.distributed (the same parser reads its stdout):

  git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests MPI=1
  mpirun -np 8 nccl-tests/build/all_reduce_perf -b 1K -e 4G -f 4 -g 1 > mb/nccl_all_reduce_1nodes.log
  (likewise all_gather_perf, reduce_scatter_perf, alltoall_perf; -np 16 over two hosts for 2 nodes)

`selftest` writes the three formats from synthetic measurements without a GPU
or PyTorch (to check a meshplan build reads them): `python3 scripts/microbench.py selftest --out /tmp/mb`.
"""

import argparse
import os
import socket
import sys

# ------------------------------------------------------------------ shapes

# GEMM sweep: the smallest dimension x = min(m, n, k) sets the efficiency in
# meshplan's form e_max * (x / ceil128(x)) * x / (x + x_half): tokens per
# micro-batch (m) from 128 to 16k against the widths of 7B-70B layers.
GEMM_M = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
GEMM_NK = [(4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672), (6144, 4096)]
GEMM_ODD = [(100, 4096, 4096), (200, 8192, 8192), (1000, 4096, 4096), (3000, 8192, 8192)]

# Attention sweep: (batch, seq, heads, head_dim) at ~32k tokens per call,
# causal and not.
ATTENTION = [
    (16, 2048, 32, 128),
    (8, 4096, 32, 128),
    (4, 8192, 32, 128),
    (2, 16384, 32, 128),
    (8, 4096, 64, 64),
    (4, 8192, 16, 128),
]

# Collectives: 1 KiB to 1 GiB by x4 (bytes per rank buffer, nccl-tests' `size`).
SIZES = [1024 * 4**i for i in range(11)]
OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]

# ------------------------------------------------------------------ writers (no torch)


def write_gemm(path, rows):
    """rows: (m, n, k, dtype, seconds)."""
    with open(path, "w") as f:
        f.write("# scripts/microbench.py GEMM sweep: time of one [m,k]x[k,n] matmul, mean of the timed iterations\n")
        f.write("m,n,k,dtype,time_us\n")
        for m, n, k, dt, s in rows:
            f.write(f"{m},{n},{k},{dt},{s * 1e6:.4f}\n")


def write_attention(path, rows):
    """rows: (batch, seq, keys, heads, head_dim, causal, seconds)."""
    with open(path, "w") as f:
        f.write("# scripts/microbench.py attention sweep: forward kernel time (bf16)\n")
        f.write("batch,seq,keys,heads,head_dim,causal,time_us\n")
        for b, s, kk, h, d, c, t in rows:
            f.write(f"{b},{s},{kk},{h},{d},{int(c)},{t * 1e6:.4f}\n")


def bus_factor(op, n):
    """nccl-tests' busbw / algbw."""
    return 2.0 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def nccl_log(op, hosts, rows):
    """nccl-tests' stdout layout. hosts: the host of each rank; rows:
    (size_bytes, seconds). The in-place block is N/A (measured once)."""
    n = len(hosts)
    out = [
        f"# scripts/microbench.py (torch.distributed, NCCL) in nccl-tests' layout; nGpus 1 per rank, {n} ranks",
        f"# Collective test starting: {op}_perf",
        "# Using devices",
    ]
    local = {}
    for r, h in enumerate(hosts):
        d = local.get(h, 0)
        local[h] = d + 1
        out.append(f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {h} device {d:2d} [0x00] GPU")
    out += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    redop = "sum" if op in ("all_reduce", "reduce_scatter") else "none"
    for size, s in rows:
        us = s * 1e6
        alg = size / s / 1e9
        bus = alg * bus_factor(op, n)
        out.append(
            f"{size:12d} {size // 2:13d}  bfloat16 {redop:>7s}      -1 {us:8.2f} {alg:7.2f} {bus:7.2f}    N/A"
            f"      N/A     N/A     N/A    N/A"
        )
    out.append("#")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ measurements (torch)


def timed(fn, warmup=5, iters=20):
    """Mean seconds of fn() on the current CUDA stream (CUDA events)."""
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def gemm_sweep():
    import torch

    shapes = [(m, n, k) for m in GEMM_M for n, k in GEMM_NK] + GEMM_ODD
    rows = []
    fp8 = hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability() >= (8, 9)
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        rows.append((m, n, k, "bf16", timed(lambda: torch.matmul(a, b))))
        if fp8 and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major second operand
            one = torch.ones((), device="cuda")
            try:
                t = timed(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                rows.append((m, n, k, "fp8", t))
            except (RuntimeError, TypeError) as e:  # an older _scaled_mm signature
                print(f"fp8 GEMMs skipped: {e}", file=sys.stderr)
                fp8 = False
        del a, b
    return rows


def attention_sweep():
    import torch
    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ctx = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
    except ImportError:  # torch < 2.3
        ctx = lambda: torch.backends.cuda.sdp_kernel(enable_math=False, enable_mem_efficient=False)  # noqa: E731
    rows = []
    for b, s, h, d in ATTENTION:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (True, False):
            with ctx():
                t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            rows.append((b, s, s, h, d, causal, t))
        del q, k, v
    return rows


def collectives(out):
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    nodes = len(set(hosts))
    for op in OPS:
        rows = []
        for size in SIZES:
            el = max(size // 2 // n * n, n)  # bf16 elements, divisible by the ranks
            x = torch.zeros(el, device="cuda", dtype=torch.bfloat16)
            if op == "all_reduce":
                fn = lambda: dist.all_reduce(x)  # noqa: E731
            elif op == "all_gather":
                y = torch.empty(el, device="cuda", dtype=torch.bfloat16)
                shard = x[: el // n]
                fn = lambda: dist.all_gather_into_tensor(y, shard)  # noqa: E731
            elif op == "reduce_scatter":
                y = torch.empty(el // n, device="cuda", dtype=torch.bfloat16)
                fn = lambda: dist.reduce_scatter_tensor(y, x)  # noqa: E731
            else:
                y = torch.empty_like(x)
                fn = lambda: dist.all_to_all_single(y, x)  # noqa: E731
            iters = 20 if size < (64 << 20) else 5
            t = torch.tensor([timed(fn, warmup=3, iters=iters)], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the time
            rows.append((el * 2, t.item()))
        if rank == 0:
            path = os.path.join(out, f"nccl_{op}_{nodes}nodes.log")
            with open(path, "w") as f:
                f.write(nccl_log(op, hosts, rows))
            print(f"wrote {path}", file=sys.stderr)
    dist.destroy_process_group()


# ------------------------------------------------------------------ selftest (no GPU)


def selftest(out):
    """The three formats from a synthetic node: GEMMs at 60 % of 989.5
    TFLOP/s with x_half 64, attention at 40 %, collectives at 3 us per ring
    step and 360 GB/s bus bandwidth (8 ranks)."""
    peak = 989.5e12
    rows = []
    for m in GEMM_M:
        for n, k in GEMM_NK:
            x = min(m, n, k)
            e = 0.6 * x / (x + 64)
            rows.append((m, n, k, "bf16", 2 * m * n * k / (e * peak)))
    write_gemm(os.path.join(out, "gemm.csv"), rows)
    att = []
    for b, s, h, d in ATTENTION:
        for c in (True, False):
            keys_avg = s / 2 if c else s
            att.append((b, s, s, h, d, c, 4 * b * s * h * d * keys_avg / (0.4 * peak)))
    write_attention(os.path.join(out, "attention.csv"), att)
    hosts = ["selftest"] * 8
    for op in OPS:
        rows = [(s, 7 * 3e-6 + bus_factor(op, 8) * s / 360e9) for s in SIZES]
        with open(os.path.join(out, f"nccl_{op}_1nodes.log"), "w") as f:
            f.write(nccl_log(op, hosts, rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["compute", "gemm", "attention", "collectives", "selftest"])
    ap.add_argument("--out", default="microbench", help="output folder (created)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.what == "selftest":
        selftest(a.out)
    elif a.what == "collectives":
        collectives(a.out)
    else:
        if a.what in ("compute", "gemm"):
            write_gemm(os.path.join(a.out, "gemm.csv"), gemm_sweep())
        if a.what in ("compute", "attention"):
            write_attention(os.path.join(a.out, "attention.csv"), attention_sweep())
    print(f"files in {a.out}/ for `meshplan calibrate` (docs/fidelity.md)", file=sys.stderr)


if __name__ == "__main__":
    main()
