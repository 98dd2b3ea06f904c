"""A notebook-style tour of meshplan from Python (run: python examples/python/tour.py
after `pip install ./python`). In Jupyter, a report with a plot renders as SVG."""

from pathlib import Path

import meshplan

EX = Path(__file__).resolve().parents[1]

# %% Model counts: P, active P, KV bytes per token 2·K·H·L·bytes_kv
m = meshplan.model("llama-2-13b")
print(m.name, m.params_total)

# %% Training: memory per device vs HBM, T_math, T_comms, bubble
r = meshplan.train(EX / "train" / "llama-3-8b-h100-3d.toml")
print(f"T_math = {r.t_math_s:.3f} s, step in [{r.step_time_lower_s:.3f}, {r.step_time_upper_s:.3f}] s, fits: {r.fits}")
Path("memory.svg").write_text(r.svg("memory"))

# %% The same scenario with a different batch (any scenario field, by section)
r2 = meshplan.train(EX / "train" / "llama-3-8b-h100-3d.toml", training={"batch_tokens": "8M"})
print(f"B = 8M tokens: T_math = {r2.t_math_s:.3f} s")

# %% Serving: TPOT/TTFT and tokens/s vs batch with an SLO
i = meshplan.infer(EX / "infer" / "ch7-pq1-llama2-13b.toml", sweep=True, tpot_slo=0.05)
print(f"decode step {i.decode_step_time_s * 1e3:.2f} ms, B_crit = {i.b_crit_tokens:.0f}")
Path("serving.svg").write_text(i.svg("serving"))

# %% Planner: the ranked plans (a DataFrame when pandas is installed)
p = meshplan.plan_train(EX / "plan" / "book-ch5-q3.toml", top=10)
print(p.plans if not isinstance(p.plans, list) else [(x["rank"], x["step_time_lower_s"]) for x in p.plans])

# %% Errors carry the CLI's message
try:
    meshplan.train(model="llama-9", chip="h100", chips=8)
except meshplan.MeshplanError as e:
    print("MeshplanError:", e)
