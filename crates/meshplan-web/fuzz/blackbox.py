#!/usr/bin/env python3
"""Bounded black-box fuzz of the `meshplan` CLI and the `meshplan serve` HTTP API.

    python3 crates/meshplan-web/fuzz/blackbox.py [BINARY] [--cli N] [--http N] [--seed S]

CLI: N argument lists, each a valid command line (train / infer / plan /
roofline / model show / check …) with tokens mutated (numbers to 0, -1,
2^64-1, 1e308, inf, nan, huge strings, unit suffixes; flags dropped,
duplicated or swapped), run with a 10 s timeout. HTTP: N request bodies
(valid scenarios mutated the same way, broken JSON, trailing bytes, odd
content types) against a server on 127.0.0.1:0, each with a 10 s socket
timeout, then one GET /api/catalog to check the server still answers.

Counts: executions; crashes = a panic on stderr, a signal, an exit status
other than 0/1/2 (CLI) or a 5xx / no answer (HTTP); hangs = timeouts.
Prints a summary and the first few failing inputs; exit 1 if any.
"""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

SEEDS = [
    "train --model llama-3-8b --hw h100 --chips 8",
    "train --model llama-3.1-70b --hw h100 --chips 256 --batch-tokens 4Mi --seq-len 8192 --tp 8 --pp 4 --dp 8",
    "train --model llama-2-13b --hw tpu-v5p --mesh 4x4x4 --batch-tokens 1M",
    "infer --model llama-3-8b --hw h100 --chips 1 --batch 8",
    "infer --model llama-2-13b --hw tpu-v5e --mesh 2x4 --batch 32 --context 4096",
    "plan train --model llama-3-8b --hw h100 --chips 16 --batch-tokens 1M --top 2",
    "plan infer --model llama-3-8b --hw h100 --max-chips 8 --tpot-slo 50ms",
    "roofline bf16[B,D]*bf16[D,F]->bf16[B,F] --dims B=1024,D=8192,F=32768 --hw h100",
    "model show llama-3-8b --seq-len 4096",
    "hw show tpu-v5e",
    "collective allgather_Y --array bf16[E_Y,F] --dims E=2048,F=8192 --mesh X=8,Y=4 --hw tpu-v5e@book",
    "mfu --model llama-3-8b --hw h100 --chips 8 --tokens 1M --time 10s",
    # issue 24/25/26 options (this session)
    "infer --model llama-3.1-70b --hw h100 --chips 8 --engine vllm --concurrency 64",
    "infer --model llama-3.1-70b --hw h100 --chips 8 --engine sglang --request-rate 2",
    "plan infer --model llama-3.1-70b --hw h100 --max-chips 16 --tpot-slo 50ms --allow-quantization",
    "hw show h100 --model-parallel 64",
    "collective allgather_X --array bf16[E_X] --dims E=1048576 --mesh X=16 --hw tpu-v5e@book --full-bandwidth",
    "train --model llama-3-8b --hw tpu-v5p --chips 256 --batch-tokens 4Mi --seq-len 8192",
    "train --model llama-3.1-70b --hw h100 --chips 16 --batch-tokens 4Mi --seq-len 4096 --params-given 70e9",
]

ODD = ["0", "-1", "18446744073709551615", "18446744073709551616", "1e308", "inf", "nan",
       "-0", "0.5", "1e-300", "4Mi", "3.5k", "", " ", "x" * 5000, "💥", "1x0", "0x8",
       "16x16x16x16", "2*4x4", "llama", "h100@book", "50", "0s", "-1ms", "1e400"]


def mutate_args(rng, args):
    args = list(args)
    for _ in range(rng.randint(1, 3)):
        k = rng.random()
        if k < 0.5 and args:
            i = rng.randrange(len(args))
            args[i] = rng.choice(ODD)
        elif k < 0.65 and args:
            del args[rng.randrange(len(args))]
        elif k < 0.8 and args:
            i = rng.randrange(len(args))
            args.insert(i, args[i])
        elif k < 0.9:
            args.append(rng.choice(["--explain", "--json", "--top", "--tp", "--pp", "--chips",
                                    "--batch", "--seq-len", "--mesh", "--zero", "--remat",
                                    "--max-chips", "--tpot-slo", "--ttft-slo", "--microbatches",
                                    "--virtual-stages", "--dp", "--fsdp", "--cp", "--ep",
                                    "--plot", "--context", "--gen-len", "--prompt-len"]))
            args.append(rng.choice(ODD))
        else:
            rng.shuffle(args)
    return args


def fuzz_cli(binary, n, rng, report):
    # a scratch working directory: a mutated `--plot NAME` writes there
    work = tempfile.mkdtemp(prefix="meshplan-fuzz-")
    for _ in range(n):
        args = mutate_args(rng, rng.choice(SEEDS).split())
        t0 = time.time()
        try:
            p = subprocess.run([binary] + args, cwd=work, capture_output=True, timeout=10,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            report["cli_hangs"].append(args)
            continue
        finally:
            report["cli_execs"] += 1
            report["cli_max_s"] = max(report["cli_max_s"], time.time() - t0)
        err = p.stderr.decode("utf-8", "replace")
        if "panicked" in err or p.returncode not in (0, 1, 2):
            report["cli_crashes"].append((args, p.returncode, err[-300:]))


def start_server(binary):
    p = subprocess.Popen([binary, "serve", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    addr = line.split("http://")[1].split("/")[0]
    host, port = addr.rsplit(":", 1)
    return p, (host, int(port))


def http(addr, body, ct="application/json", path="/api/train", method="POST", timeout=10):
    s = socket.create_connection(addr, timeout=timeout)
    try:
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ct}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        s.sendall(head + body)
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    finally:
        s.close()
    status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/") else 0
    return status, out


BODIES = [
    ("/api/train", {"scenario": {"model": {"name": "llama-3-8b"}, "hardware": {"chip": "h100", "chips": 8}}}),
    ("/api/infer", {"scenario": {"model": {"name": "llama-3-8b"}, "hardware": {"chip": "h100", "chips": 1},
                                 "inference": {"batch": 8}}, "tpot_slo": "50ms"}),
    ("/api/plan/train", {"scenario": {"model": {"name": "llama-3-8b"}, "hardware": {"chip": "h100", "chips": 16},
                                      "training": {"batch_tokens": "1M"}}, "top": 2}),
    ("/api/plan/infer", {"scenario": {"model": {"name": "llama-3-8b"}, "hardware": {"chip": "h100"}},
                         "max_chips": 8, "tpot_slo": "50ms"}),
]
ODD_JSON = [0, -1, 18446744073709551615, 1.7976931348623157e308, "inf", "nan", "", "x" * 2000,
            None, [], {}, True, "4Mi", "0s", "-1", 1e-300, "llama-3-8bb", "tpu-v5e", "4x16"]


def mutate_json(rng, v, depth=0):
    if isinstance(v, dict) and v:
        v = dict(v)
        k = rng.choice(list(v))
        r = rng.random()
        if r < 0.6:
            v[k] = mutate_json(rng, v[k], depth + 1)
        elif r < 0.75:
            del v[k]
        else:
            v[rng.choice(["colour", "top", "explain", "model_config", k + "x"])] = rng.choice(ODD_JSON)
        return v
    return rng.choice(ODD_JSON)


def fuzz_http(binary, n, rng, report):
    p, addr = start_server(binary)
    try:
        for _ in range(n):
            path, body = rng.choice(BODIES)
            raw = json.dumps(mutate_json(rng, body)).encode()
            ct = "application/json"
            r = rng.random()
            if r < 0.05:
                raw += b" {}"
            elif r < 0.1:
                ct = rng.choice(["application/jsonx", "text/plain", "", "application/json; charset=utf-8"])
            elif r < 0.15:
                raw = raw[: rng.randrange(len(raw) + 1)]
            t0 = time.time()
            try:
                status, out = http(addr, raw, ct, path)
            except (socket.timeout, TimeoutError):
                report["http_hangs"].append((path, raw[:200]))
                continue
            except OSError as e:
                report["http_crashes"].append((path, raw[:200], repr(e)))
                continue
            finally:
                report["http_execs"] += 1
                report["http_max_s"] = max(report["http_max_s"], time.time() - t0)
            if status == 0 or status >= 500:
                report["http_crashes"].append((path, raw[:200], out[:300]))
        status, _ = http(addr, b"", path="/api/catalog", method="GET")
        report["http_alive_after"] = status == 200
    finally:
        p.terminate()
        p.wait(timeout=10)


def main():
    a = sys.argv[1:]
    binary = os.path.join(ROOT, "target", "debug", "meshplan")
    if a and not a[0].startswith("--"):
        binary = os.path.abspath(a.pop(0))
    opts = dict(zip(a[::2], a[1::2]))
    rng = random.Random(int(opts.get("--seed", 23)))
    report = {"cli_execs": 0, "cli_crashes": [], "cli_hangs": [], "cli_max_s": 0.0,
              "http_execs": 0, "http_crashes": [], "http_hangs": [], "http_max_s": 0.0}
    t0 = time.time()
    fuzz_cli(binary, int(opts.get("--cli", 1000)), rng, report)
    fuzz_http(binary, int(opts.get("--http", 1000)), rng, report)
    print(f"wall {time.time() - t0:.0f} s")
    for k in ["cli", "http"]:
        print(f"{k}: {report[k + '_execs']} executions, {len(report[k + '_crashes'])} crashes, "
              f"{len(report[k + '_hangs'])} hangs, slowest {report[k + '_max_s']:.1f} s")
        for c in (report[k + "_crashes"] + report[k + "_hangs"])[:8]:
            print("  ", c)
    print("server answers after the run:", report.get("http_alive_after"))
    bad = any(report[k] for k in ["cli_crashes", "cli_hangs", "http_crashes", "http_hangs"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
