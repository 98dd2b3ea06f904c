"""`python3 python/fuzz/blackbox.py [N] [SEED]` (after `pip install ./python`).

Bounded black-box fuzz of the Python front end: valid calls with one or two
arguments mutated; counts executions, crashes (an exception that is not a
MeshplanError / TypeError / ValueError, or a NaN/inf in the JSON) and hangs
(a call over 10 s)."""
import json, math, random, signal, sys, time
import meshplan
from meshplan import MeshplanError

random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
SEEDS = [
    ("train", dict(model="llama-3-8b", chip="h100", chips=8, training=dict(batch_tokens="1Mi", seq_len=4096))),
    ("train", dict(model="llama-3.1-70b", chip="tpu-v5p", chips=256, training=dict(batch_tokens="4Mi", seq_len=8192))),
    ("infer", dict(model="llama-3-8b", chip="h100", chips=1, inference=dict(batch=8))),
    ("infer", dict(model="llama-3.1-70b", chip="h100", chips=8, inference=dict(engine="vllm", workload="concurrency=64"))),
    ("plan_infer", dict(model="llama-3-8b", chip="h100", chips=8, tpot_slo="50ms")),
    ("model", dict(name="llama-3-8b")),
    ("hw", dict(name="h100")),
]
VALUES = [8, 16, "2Mi", "full", "none", 1, 2, 4096, "h200", "llama-2-7b", 0, -1, 2**64 - 1, 1e308, float("inf"), float("nan"), "", "x" * 10000, "1e400", "4Zi", "-5ms",
          None, [], {}, "llama-3-8b", "h100", 3, "auto", True, "0s", "1Mi", 1.5]
def nonfinite(v):
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, dict):
        return any(nonfinite(x) for x in v.values())
    if isinstance(v, list):
        return any(nonfinite(x) for x in v)
    return False
class Hang(Exception): pass
def alarm(*_): raise Hang()
signal.signal(signal.SIGALRM, alarm)
ex = crashes = hangs = ok = 0; slowest = 0.0; bad = []
for i in range(N):
    fn, kw = random.choice(SEEDS); kw = dict(kw)
    for _ in range(random.randint(0, 2)):
        k = random.choice(list(kw) + ["mesh", "top"])
        sub = kw.get(k)
        if isinstance(sub, dict) and random.random() < 0.8:
            sub = dict(sub); sub[random.choice(list(sub) + ["remat", "zero", "context", "microbatches"])] = random.choice(VALUES); kw[k] = sub
        else:
            kw[k] = random.choice(VALUES)
    f = getattr(meshplan, fn)
    t = time.time(); signal.alarm(10)
    try:
        r = f(kw.pop("name"), **kw) if fn in ("model", "hw") else f(**kw)
        d = r.to_dict() if hasattr(r, "to_dict") else r
        ok += 1
        if nonfinite(d): crashes += 1; bad.append((fn, kw, "non-finite"))
    except Hang:
        hangs += 1; bad.append((fn, kw, "hang"))
    except (MeshplanError, TypeError, ValueError):
        pass
    except Exception as e:
        crashes += 1; bad.append((fn, kw, repr(e)[:200]))
    finally:
        signal.alarm(0)
    slowest = max(slowest, time.time() - t); ex += 1
print(f"python: {ex} executions ({ok} answered, the rest a typed error), {crashes} crashes, {hangs} hangs, slowest {slowest:.1f} s")
for b in bad[:5]: print(b)
