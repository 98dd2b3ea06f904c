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
