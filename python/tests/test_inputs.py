"""One input layer for every front end (issue 23): the same scenarios — a
catalog name, a Hugging Face config.json, a scenario file with ``[model]
file = …``, unit strings ("4Mi", "50ms"), a missing file, a FIFO and
/dev/zero — given to the CLI (``--json``), the Python package and the web
API (where it takes them) give identical numbers or identical error
messages, because all three read and resolve input through the same Rust
code (crates/meshplan-io and the core). Python's errors are typed
(``FileError``, ``UnknownNameError``, ``InputError``, all
``MeshplanError``), and Ctrl-C interrupts a long Python call."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import meshplan
from meshplan import FileError, InputError, MeshplanError, UnknownNameError
from test_meshplan import ROOT, same
from test_web import api, exe, server  # noqa: F401  (the `meshplan serve` fixture)

HF = ROOT / "crates" / "meshplan-core" / "tests" / "fixtures" / "hf" / "llama-2-7b.json"
# The fixture's own `_name_or_path` is "meta-llama/Llama-2-7b-hf": downloaded
# with `--local-dir Llama-2-7b-hf` the CLI and Python name the model after the
# directory, and the web API (a pasted config.json, no directory) after
# `_name_or_path` — the same name, so whole reports compare equal.
HF_DIR = "Llama-2-7b-hf"

# The workload every case runs: unit strings as the CLI's flags take them.
TRAIN = {"batch_tokens": "4Mi", "seq_len": 4096}
TRAIN_FLAGS = ["--hw", "h100", "--chips", "8", "--batch-tokens", "4Mi", "--seq-len", "4096"]


def run_cli(*args):
    """(exit status, --json object or None, stderr) of the CLI."""
    if not Path(exe()).exists():
        pytest.skip(f"{exe()} not built (cargo build)")
    out = subprocess.run([exe(), *args, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    return out.returncode, (json.loads(out.stdout) if out.returncode == 0 else None), out.stderr


def cli_error(*args):
    """The CLI's error message on one line (``error: a`` + ``caused by: b``
    → ``a: b``), as Python and the web API write it."""
    code, _, err = run_cli(*args)
    assert code == 2, err
    lines = err.rstrip("\n").splitlines()
    assert lines[0].startswith("error: "), err
    return ": ".join([lines[0][len("error: "):]] + [l.strip()[len("caused by: "):] for l in lines[1:]])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A downloaded config.json and scenario files that name it."""
    d = tmp_path_factory.mktemp("inputs")
    (d / HF_DIR).mkdir()
    shutil.copy(HF, d / HF_DIR / "config.json")
    hw = '[hardware]\nchip = "h100"\nchips = 8\n[training]\nbatch_tokens = "4Mi"\nseq_len = 4096\n'
    (d / "scenario.toml").write_text(f'[model]\nfile = "{HF_DIR}/config.json"\n{hw}')
    (d / "missing-model.toml").write_text(f'[model]\nfile = "nope.json"\n{hw}')
    return d


def web_train(url, model_name=None, model_config=None):
    sc = {"model": {"name": model_name or "x"}, "hardware": {"chip": "h100", "chips": 8}, "training": TRAIN}
    body = {"scenario": sc}
    if model_config is not None:
        body["model_config"] = model_config
    return api(url, "/api/train", body)


def test_the_same_scenarios_give_the_same_answers_in_every_front_end(files, server):  # noqa: F811
    config = files / HF_DIR / "config.json"

    # 1. a catalog name and unit strings
    _, c, _ = run_cli("train", "--model", "llama-2-7b", *TRAIN_FLAGS)
    same(meshplan.train(model="llama-2-7b", chip="h100", chips=8, training=TRAIN).to_dict(), c)
    status, w = web_train(server, "llama-2-7b")
    assert status == 200, w
    same(w["report"], c)

    # 2. a Hugging Face config.json: `--model FILE`, model=FILE, the pasted text
    _, h, _ = run_cli("train", "--model", str(config), *TRAIN_FLAGS)
    assert h["model"] == HF_DIR  # named after its download, not "config"
    same(meshplan.train(model=config, chip="h100", chips=8, training=TRAIN).to_dict(), h)
    status, w = web_train(server, model_config=config.read_text())
    assert status == 200, w
    same(w["report"], h)
    # the same architecture as the catalog's llama-2-7b: the same parameters
    assert h["params"] == c["params"]
    # `model show FILE` and meshplan.model(FILE)
    _, m, _ = run_cli("model", "show", str(config))
    same(meshplan.model(config).to_dict(), m)
    same(meshplan.model(str(config)).to_dict(), m)

    # 3. a scenario file whose [model] file is relative to the scenario
    _, s, _ = run_cli("train", str(files / "scenario.toml"))
    same(meshplan.train(files / "scenario.toml").to_dict(), s)
    same(s, h)
    # the web API reads no files: it says so and takes the pasted config
    status, w = api(server, "/api/train", {"scenario": {"model": {"file": f"{HF_DIR}/config.json"}}})
    assert status == 400 and "reads no files" in w["error"], w

    # 4. unit strings in a serving search: --tpot-slo 50ms, tpot_slo="50ms"
    _, p, _ = run_cli("plan", "infer", "--model", "llama-3-8b", "--hw", "h100", "--chips", "8", "--tpot-slo", "50ms")
    py_p = meshplan.plan_infer(model="llama-3-8b", chip="h100", chips=8, tpot_slo="50ms").to_dict()
    status, w = api(
        server,
        "/api/plan/infer",
        {"scenario": {"model": {"name": "llama-3-8b"}, "hardware": {"chip": "h100", "chips": 8}}, "tpot_slo": "50ms"},
    )
    assert status == 200, w
    for d in (p, py_p, w["report"]):
        d.pop("search_time_s")
    same(py_p, p)
    same(w["report"], p)

    # 5. the same errors: a missing model file, scenario file, [model] file
    missing = cli_error("train", "--model", "nope.json", *TRAIN_FLAGS)
    assert missing.startswith("cannot read 'nope.json': "), missing
    with pytest.raises(FileError) as e:
        meshplan.train(model="nope.json", chip="h100", chips=8, training=TRAIN)
    assert str(e.value) == missing
    with pytest.raises(FileError) as e:
        meshplan.model("nope.json")
    assert str(e.value) == cli_error("model", "show", "nope.json")
    with pytest.raises(FileError) as e:
        meshplan.train(files / "absent.toml")
    assert str(e.value) == cli_error("train", str(files / "absent.toml"))
    with pytest.raises(InputError) as e:
        meshplan.train(files / "missing-model.toml")
    assert str(e.value) == cli_error("train", str(files / "missing-model.toml"))
    assert "[model] file: cannot read" in str(e.value)

    # 6. an unknown name: the same message, an UnknownNameError in Python
    msg = cli_error("train", "--model", "llama-2-7bb", *TRAIN_FLAGS)
    with pytest.raises(UnknownNameError) as e:
        meshplan.train(model="llama-2-7bb", chip="h100", chips=8, training=TRAIN)
    assert str(e.value) == msg
    status, w = web_train(server, "llama-2-7bb")
    assert status == 400 and w["error"] == msg
    with pytest.raises(UnknownNameError) as e:
        meshplan.hw("h1000")
    assert str(e.value) == cli_error("hw", "show", "h1000")

    # 7. a claims file without claims: refused alike, not an all-pass report
    empty = files / "empty-claims.toml"
    empty.write_text('title = "nothing yet"\n')
    with pytest.raises(InputError) as e:
        meshplan.check(empty)
    assert str(e.value) == cli_error("check", str(empty))
    assert "no claims found" in str(e.value)

    # 8. a malformed unit: the same core message (the flag's name differs)
    with pytest.raises(InputError, match="cannot read"):
        meshplan.train(model="llama-2-7b", chip="h100", chips=8, training={"batch_tokens": "4Qi"})


def test_typed_errors_are_meshplan_errors():
    assert issubclass(UnknownNameError, InputError)
    for t in (InputError, UnknownNameError, FileError):
        assert issubclass(t, MeshplanError)
    # existing `except MeshplanError` code keeps working
    with pytest.raises(MeshplanError):
        meshplan.train(model="no-such-model", chip="h100", chips=8)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("call", ["train", "model", "model-arg", "check", "validate"])
def test_devices_and_fifos_are_refused_at_once_like_the_cli(call, tmp_path):
    """/dev/zero used to be read until the kernel killed Python (24 GB), a
    FIFO to block forever; both are refused before they are opened."""
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    calls = {
        "train": lambda p: meshplan.train(p),
        "model": lambda p: meshplan.model(p),
        "model-arg": lambda p: meshplan.train(model=p, chip="h100", chips=8),
        "check": lambda p: meshplan.check(p),
        "validate": lambda p: meshplan.validate(p),
    }
    # a MODEL argument is a file when it ends in .json or .toml, as in the CLI
    paths = [str(fifo), str(folder)] + ([] if call.startswith("model") else ["/dev/zero"])
    for path in paths:
        t0 = time.monotonic()
        with pytest.raises(FileError) as e:
            calls[call](path)
        assert time.monotonic() - t0 < 5
        assert str(e.value) == f"'{path}' is not a regular file", str(e.value)
    assert cli_error("train", "/dev/zero") == "'/dev/zero' is not a regular file"
    assert cli_error("train", str(fifo)) == f"'{fifo}' is not a regular file"


# A search that takes tens of seconds (about 30 s on one thread: DeepSeek-V3's
# expert-parallel degrees, offload and rank orders over 65,536 chips):
# Ctrl-C must end it within a second or two.
LONG_SEARCH = textwrap.dedent(
    """
    import sys, meshplan
    print("started", flush=True)
    try:
        meshplan.plan_train(model="deepseek-v3", chip="h800", chips=65536, top=1, threads=1,
                            training={"batch_tokens": "64Mi", "seq_len": 8192, "offload": ["auto"]},
                            parallelism={"rank_order": "auto"})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
    """
)


def test_ctrl_c_interrupts_a_long_search():
    p = subprocess.Popen([sys.executable, "-c", LONG_SEARCH], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(1.0)  # well inside the search
        assert p.poll() is None, "the search ended before Ctrl-C: make it longer"
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=10)
        waited = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert out.strip() == "interrupted" and p.returncode == 3, (out, p.returncode)
    assert waited < 2.0, waited


# ---- the README's and docs' examples through every front end ------------

PARALLELISM = {"dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "rank_order", "zero", "schedule",
               "microbatches", "virtual_stages", "sequence_parallel", "sharding"}
TRAINING = {"batch_tokens", "seq_len", "param_dtype", "grad_dtype", "optimizer_dtype", "activation_dtype",
            "optimizer", "master_weights", "remat", "mfu", "train_tokens", "framework", "comm_efficiency",
            "compute_dtype"}
INFERENCE = {"weights_dtype", "kv_dtype", "compute_dtype", "batch", "prompt_len", "context", "gen_len", "mfu",
             "engine", "workload"}
# flags that are arguments of the call rather than scenario keys
CALL_ARGS = {"plan infer": {"max_chips", "ttft_slo", "tpot_slo", "objective", "top"},
             "plan train": {"objective", "top"}, "infer": set(), "train": set()}
# output options: the examples that use them show output, not other input
OUTPUT_ONLY = ("--explain", "--plot", "--trace", "--format", "--catalog", "--all")


def doc_examples():
    """Every one-command `meshplan train|infer|plan …|model show|hw show`
    example of the README and docs/*.md (continuation lines joined)."""
    import re

    found = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"\\\n\s*", " ", md.read_text())
        for line in text.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip().removeprefix("$ "))
            m = re.match(r"meshplan (train|infer|plan train|plan infer|model show|hw show)\b([^|#>`]*)$", line)
            if m and not any(o in m.group(2) for o in OUTPUT_ONLY):
                found.append((m.group(1), m.group(2).split()))
    return sorted(set((c, tuple(a)) for c, a in found))


def typed(v):
    if v is True:
        return v
    for t in (int, float):
        try:
            return t(v)
        except ValueError:
            pass
    return v


def as_call(cmd, args):
    """(positional, keyword arguments, scenario JSON or None for the web
    API) of a CLI example, or None when a flag has no Python spelling here."""
    args = [a for a in args if a != "--json"]
    pos, kw, sections = None, {}, {}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            pos = a
            i += 1
            continue
        key = a[2:].replace("-", "_")
        if key == "non_causal":
            kw["causal"] = False
            i += 1
            continue
        # a switch (`--sequence-parallel`) takes no value
        if i + 1 == len(args) or args[i + 1].startswith("--"):
            v, i = True, i + 1
        else:
            v, i = args[i + 1], i + 2
        if cmd in ("model show", "hw show"):
            if key not in ("seq_len", "kv_dtype"):
                return None
            kw[key] = v
        elif key in ("model", "chips", "mesh"):
            kw[key] = v
        elif key == "hw":
            kw["chip"] = v
        elif key in CALL_ARGS[cmd]:
            kw[key] = typed(v) if key in ("top", "max_chips") else v
        else:
            section = ("parallelism" if key in PARALLELISM else
                       "training" if cmd.endswith("train") and key in TRAINING else
                       "inference" if cmd.endswith("infer") and key in INFERENCE else None)
            if section is None:
                return None
            sections.setdefault(section, {})[key] = typed(v)
    return pos, kw, sections


def test_the_docs_examples_give_the_cli_numbers_in_python_and_the_web_api(server):  # noqa: F811
    tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11

    fns = {"train": meshplan.train, "infer": meshplan.infer, "plan train": meshplan.plan_train,
           "plan infer": meshplan.plan_infer, "model show": meshplan.model, "hw show": meshplan.hw}
    ran, web = [], 0
    for cmd, args in doc_examples():
        call = as_call(cmd, list(args))
        if call is None:
            continue
        pos, kw, sections = call
        code, want, err = run_cli(*cmd.split(), *args)
        if code != 0:
            # an example that fails must fail alike in Python
            with pytest.raises(MeshplanError) as e:
                fns[cmd](pos, **kw, **sections) if pos else fns[cmd](**kw, **sections)
            assert str(e.value) == cli_error(*cmd.split(), *args), (cmd, args)
            ran.append((cmd, args))
            continue
        got = (fns[cmd](pos, **kw, **sections) if pos else fns[cmd](**kw, **sections)).to_dict()
        for d in (got, want):
            d.pop("search_time_s", None)
        same(got, want, f"{cmd} {' '.join(args)}")
        ran.append((cmd, args))
        if cmd in ("model show", "hw show"):
            continue
        # the web API: the scenario file (read here: the server reads none) or the flags
        scenario = tomllib.loads((ROOT / pos).read_text()) if pos else {}
        if "file" in scenario.get("model", {}):
            continue
        if "model" in kw:
            scenario["model"] = {"name": kw.pop("model")}
        hw_ = scenario.setdefault("hardware", {})
        for k, dst in (("chip", "chip"), ("chips", "chips"), ("mesh", "mesh")):
            if k in kw:
                hw_[dst] = kw.pop(k)
                if k == "chips":
                    hw_.pop("mesh", None)
        for s, v in sections.items():
            scenario.setdefault(s, {}).update(v)
        path = "/api/" + cmd.replace(" ", "/")
        status, w = api(server, path, {"scenario": scenario, **kw})
        assert status == 200, (cmd, args, w)
        w["report"].pop("search_time_s", None)
        same(w["report"], want, f"web {cmd} {' '.join(args)}")
        web += 1
    # 19 examples when this was written: every one with no output-only option
    assert len(ran) >= 15, ran
    assert web >= 6, web
