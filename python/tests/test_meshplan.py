"""pytest for the meshplan Python package: the same numbers as the CLI,
errors as MeshplanError, plots as SVG."""

import json
import math
import os
import subprocess
import xml.dom.minidom
from pathlib import Path

import pytest

import meshplan
from meshplan import MeshplanError

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"


def cli(*args, ok=(0,)):
    """Run target/debug/meshplan (or $MESHPLAN_BIN) with --json."""
    exe = os.environ.get("MESHPLAN_BIN", str(ROOT / "target" / "debug" / "meshplan"))
    if not Path(exe).exists():
        pytest.skip(f"{exe} not built (cargo build)")
    out = subprocess.run([exe, *args, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode in ok, out.stderr
    return json.loads(out.stdout)


def same(a, b, path=""):
    """Identical numbers (floats to 12 significant digits: JSON round trip)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0), (path, a, b)
    else:
        assert a == b, (path, a, b)


def test_train_matches_cli():
    sc = EX / "train" / "llama-3-8b-h100-3d.toml"
    same(meshplan.train(sc).to_dict(), cli("train", str(sc)))


def test_train_flags_match_cli():
    r = meshplan.train(model="llama-3-8b", chip="h100", chips=8, training={"batch_tokens": "1M", "seq_len": 4096})
    c = cli("train", "--model", "llama-3-8b", "--hw", "h100", "--chips", "8", "--batch-tokens", "1M", "--seq-len", "4096")
    same(r.to_dict(), c)


def test_infer_matches_cli():
    sc = EX / "infer" / "ch7-pq1-llama2-13b.toml"
    same(meshplan.infer(sc).to_dict(), cli("infer", str(sc)))


def test_plan_train_matches_cli():
    sc = EX / "plan" / "book-ch5-q3.toml"
    a = meshplan.plan_train(sc, top=5).to_dict()
    b = cli("plan", "train", str(sc), "--top", "5")
    for d in (a, b):
        d.pop("search_time_s")
    same(a, b)


def test_plan_train_searches_batch_and_dtype_as_the_cli():
    kw = dict(model="llama-3-8b", chip="h100", chips=8, top=3,
              training={"batch_tokens": "64Ki", "seq_len": 4096})
    a = meshplan.plan_train(max_global_batch="64 seqs", dtypes=["bf16", "fp8"], **kw).to_dict()
    b = cli("plan", "train", "--model", "llama-3-8b", "--hw", "h100", "--chips", "8",
            "--batch-tokens", "64Ki", "--seq-len", "4096", "--top", "3",
            "--max-global-batch", "64 seqs", "--dtypes", "bf16,fp8")
    for d in (a, b):
        d.pop("search_time_s")
    same(a, b)
    assert a["searched"]["batches_tokens"] == [65536, 131072, 262144]
    with pytest.raises(meshplan.InputError, match="below the batch"):
        meshplan.plan_train(max_global_batch="1Ki", **kw)
    with pytest.raises(meshplan.InputError, match="--dtypes"):
        meshplan.plan_train(dtypes="bf16,int4", **kw)


def test_model_hw_check_match_cli():
    same(meshplan.model("llama-2-13b").to_dict(), cli("model", "show", "llama-2-13b"))
    same(meshplan.hw("h100").to_dict(), cli("hw", "show", "h100"))
    claims = EX / "claims" / "seed-000-ch5.toml"
    same(meshplan.check(claims).to_dict(), cli("check", str(claims), ok=(0, 1)))


def test_report_access():
    r = meshplan.train(EX / "train" / "llama-3-8b-h100-3d.toml")
    assert r.t_math_s == r["t_math_s"] == r.to_dict()["t_math_s"] > 0
    assert r.model == "llama-3-8b"
    assert "memory_per_device" in r


def test_errors_carry_the_core_message():
    with pytest.raises(meshplan.MeshplanError, match="unknown model 'no-such-model'"):
        meshplan.train(model="no-such-model", chip="h100", chips=8)
    with pytest.raises(meshplan.MeshplanError, match="cannot read"):
        meshplan.train("does/not/exist.toml")
    with pytest.raises(meshplan.MeshplanError, match="unknown scenario section"):
        meshplan.train(model="llama-3-8b", chip="h100", chips=8, trainnig={"seq_len": 1})
    # the core's one "no model" rule, worded for Python, in every function
    for f in (meshplan.train, meshplan.infer, meshplan.plan_train, meshplan.plan_infer):
        with pytest.raises(meshplan.MeshplanError, match="no model given: pass model=NAME"):
            f(chip="h100", chips=8)
    assert issubclass(meshplan.MeshplanError, Exception)


def well_formed_svg(s):
    doc = xml.dom.minidom.parseString(s)
    assert doc.documentElement.tagName == "svg"
    return s


def test_plots_render_as_svg():
    r = meshplan.train(EX / "train" / "llama-3-8b-h100-3d.toml")
    assert "usable HBM" in well_formed_svg(r._repr_svg_())
    assert "T_math" in well_formed_svg(r.svg("step-time"))
    i = meshplan.infer(EX / "infer" / "ch7-pq1-llama2-13b.toml", sweep=True, tpot_slo=0.05)
    assert "roofline" in well_formed_svg(i.svg("roofline"))
    assert "TPOT SLO" in well_formed_svg(i.svg("serving"))
    p = meshplan.plan_train(EX / "plan" / "book-ch5-q3.toml", top=20)
    assert "Pareto front" in well_formed_svg(p._repr_svg_())
    with pytest.raises(meshplan.MeshplanError):
        meshplan.model("llama-2-13b").svg()


def critical_path_s(trace):
    """Seconds of a Chrome trace's critical-path events (``dur`` in µs)."""
    return sum(
        e["dur"] / 1e6
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["args"]["critical_path"]
    )


def test_trace_is_the_cli_trace_and_adds_up_to_the_step(tmp_path):
    sc = EX / "train" / "llama-3-8b-h100-3d.toml"
    out = tmp_path / "step.json"
    r = meshplan.train(sc, trace=out, parallelism={"microbatches": 8})
    trace = json.loads(out.read_text())
    assert trace == r.trace
    step = r.predicted["step_time_s"]
    assert math.isclose(critical_path_s(trace), step, rel_tol=0.01)
    # the CLI's --trace writes the same events
    exe = os.environ.get("MESHPLAN_BIN", str(ROOT / "target" / "debug" / "meshplan"))
    if Path(exe).exists():
        cli_out = tmp_path / "cli.json"
        subprocess.run(
            [exe, "train", str(sc), "--microbatches", "8", "--trace", str(cli_out)],
            check=True, capture_output=True, cwd=ROOT,
        )
        same(json.loads(cli_out.read_text()), trace)
    assert "pipeline bubble (idle)" in well_formed_svg(r.svg("timeline"))


def test_trace_errors(tmp_path):
    with pytest.raises(meshplan.MeshplanError, match="prediction not available: compute dtype fp32"):
        meshplan.train(model="llama-3-8b", chip="h100", chips=8, trace=tmp_path / "x.json",
                       training={"compute_dtype": "fp32"})
    assert not (tmp_path / "x.json").exists()
    sc = tmp_path / "plan.toml"
    sc.write_text((EX / "train" / "llama-3-8b-h100-3d.toml").read_text())
    before = sc.read_text()
    with pytest.raises(meshplan.MeshplanError, match="refusing to overwrite"):
        meshplan.train(sc, trace=sc)
    assert sc.read_text() == before
    # no trace asked: no prediction is no error, and no timeline plot
    r = meshplan.train(model="llama-3-8b", chip="h100", chips=8, training={"compute_dtype": "fp32"})
    assert "timeline" not in r.plots and r.trace is None


def test_plans_table():
    p = meshplan.plan_train(EX / "plan" / "book-ch5-q3.toml", top=5)
    plans = p.plans
    assert len(plans) == 5
    try:
        import pandas  # noqa: F401
    except ImportError:
        assert isinstance(plans, list) and plans[0]["rank"] == 1
    else:
        assert list(plans["rank"]) == [1, 2, 3, 4, 5]


def test_plan_infer():
    r = meshplan.plan_infer(model="llama-2-13b", chip="h100", chips=8, top=3)
    assert r.model
    assert len(r.plans) <= 3


def test_plan_infer_matches_cli_with_the_core_defaults():
    # the same request as the CLI's and the web API's tests
    # (crates/meshplan-cli/tests/cli/serving_request.rs, crates/meshplan-web/tests/api.rs):
    # nothing but the model, chips and a TPOT SLO, so top, objective and
    # lengths are the core's defaults in every front end
    r = meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, tpot_slo="50ms").to_dict()
    c = cli("plan", "infer", "--model", "llama-3-8b", "--hw", "h100", "--chips", "8", "--tpot-slo", "50ms")
    for d in (r, c):
        d.pop("search_time_s")
    same(r, c)
    # the same SLO as seconds or a timedelta is the same request
    import datetime

    for slo in (0.05, datetime.timedelta(milliseconds=50)):
        d = meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, tpot_slo=slo).to_dict()
        d.pop("search_time_s")
        same(d, c)


def test_plan_infer_allow_quantization_is_the_cli_flag():
    # a bf16 model is searched in bf16 unless quantization is allowed, as
    # with the CLI's --allow-quantization (the same report, timing aside)
    r = meshplan.plan_infer(
        model="llama-3-8b", chip="h100", chips=8, tpot_slo="50ms", allow_quantization=True
    ).to_dict()
    c = cli(
        "plan", "infer", "--model", "llama-3-8b", "--hw", "h100", "--chips", "8",
        "--tpot-slo", "50ms", "--allow-quantization",
    )
    for d in (r, c):
        d.pop("search_time_s")
    same(r, c)
    plain = meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, tpot_slo="50ms").to_dict()
    assert plain["dtypes"] != r["dtypes"]


BAD_SLOS = [float("inf"), float("-inf"), float("nan"), -1, 0, 0.0, "0s", 1.7976931348623157e308, 1e5, "2 days", "-50ms"]


@pytest.mark.parametrize("slo", BAD_SLOS, ids=repr)
@pytest.mark.parametrize("name", ["ttft_slo", "tpot_slo"])
def test_every_bad_slo_is_refused_with_the_core_message(slo, name):
    import time

    t0 = time.monotonic()
    calls = [
        lambda: meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, **{name: slo}),
        lambda: meshplan.infer(model="llama-3-8b", chip="h100", chips=1, sweep=True, **{name: slo}),
    ]
    for call in calls:
        with pytest.raises(MeshplanError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(f"cannot read {name} from '"), msg
        assert "expected a positive duration of at most 86400 s" in msg, msg
    # an infinite SLO on the serving plot used to spin forever
    assert time.monotonic() - t0 < 30


def test_slo_of_the_wrong_type_names_the_argument():
    with pytest.raises(MeshplanError, match="tpot_slo"):
        meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, tpot_slo=[1])


def test_validate_one_and_several_sources():
    v = ROOT / "crates" / "meshplan-core" / "tests" / "fixtures" / "validation"
    one = meshplan.validate(v / "published_runs.json")
    same(one.to_dict(), cli("validate", str(v / "published_runs.json")))
    # two files, three sources: one leave-one-source-out fold per source, as
    # `meshplan validate A.csv B.json` reports them
    two = meshplan.validate(v / "playbook_subset.csv", v / "published_runs.json").to_dict()
    assert [f["source"] for f in two["held_out"]["folds"]] == ["kor22", "mcore24", "playbook"]
    assert two["held_out"]["held_out"]["by_chip"]["h100"]["n"] > 0
    with pytest.raises(TypeError):
        meshplan.validate()


def test_plan_infer_disagg_is_the_cli_flag():
    # disaggregated prefill/decode pools are searched with disagg="on", as
    # with the CLI's --disagg on (the same report, timing aside); a bad mode
    # is refused with the core's message naming it
    r = meshplan.plan_infer(
        model="llama-3-8b", chip="h100", max_chips=8, tpot_slo="50ms", disagg="on"
    ).to_dict()
    c = cli(
        "plan", "infer", "--model", "llama-3-8b", "--hw", "h100", "--max-chips", "8",
        "--tpot-slo", "50ms", "--disagg", "on",
    )
    for d in (r, c):
        d.pop("search_time_s")
    same(r, c)
    assert r["disagg"] == "on"
    assert any("disagg" in p for p in r["pareto"])
    with pytest.raises(Exception, match="disagg"):
        meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, disagg="sometimes")
