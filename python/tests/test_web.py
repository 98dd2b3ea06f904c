"""`meshplan serve` against the CLI and the Python package: the same scenario
through all front ends gives identical numbers — the CLI's ``--json``, the
Python package, the web API and the page a real browser renders (headless
Chromium driven over WebDriver by Selenium). The browser test also changes
inputs, checks the plots are drawn and writes a screenshot.

Without ``chromium`` and ``chromedriver`` the browser test is skipped with a
message, except under CI (``CI`` set: ``.ci/run`` installs both), where it
fails. The server is ``target/debug/meshplan serve`` (or $MESHPLAN_BIN)."""

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

import meshplan
from test_meshplan import ROOT, cli, same

# One training and one serving scenario, as the page's form can state them.
TRAIN = {
    "model": {"name": "llama-3-8b"},
    "hardware": {"chip": "h100", "mesh": "8x8"},
    "training": {"batch_tokens": "4Mi", "seq_len": 8192, "remat": "selective", "mfu": 0.4},
    "parallelism": {"dp": 4, "tp": 8, "pp": 2, "zero": 1, "microbatches": 128},
}
INFER = {
    "model": {"name": "llama-2-13b"},
    "hardware": {"chip": "tpu-v5e@book", "mesh": "2x4"},
    "inference": {"batch": 8, "context": 8192, "kv_dtype": "int8", "workload": "lockstep=8"},
}


def flags(sc):
    """The CLI flags of a scenario (--model, --hw, --mesh, then the keys)."""
    out = ["--model", sc["model"]["name"], "--hw", sc["hardware"]["chip"], "--mesh", sc["hardware"]["mesh"]]
    for sec in ("training", "inference", "parallelism"):
        for k, v in sc.get(sec, {}).items():
            out += ["--" + k.replace("_", "-"), str(v)]
    return out


def py(fn, sc):
    """The Python package's report of a scenario."""
    sections = {k: v for k, v in sc.items() if k not in ("model", "hardware")}
    return fn(model=sc["model"]["name"], chip=sc["hardware"]["chip"], mesh=sc["hardware"]["mesh"], **sections)


def exe():
    """The CLI binary: $MESHPLAN_BIN or target/debug/meshplan."""
    return os.environ.get("MESHPLAN_BIN", str(ROOT / "target" / "debug" / "meshplan"))


def cli_text(*args):
    """The CLI's human output (the report's document as text)."""
    return subprocess.run([exe(), *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout


@pytest.fixture(scope="module")
def server():
    """`meshplan serve --port 0`: its URL (read from its first line)."""
    if not Path(exe()).exists():
        pytest.skip(f"{exe()} not built (cargo build)")
    p = subprocess.Popen([exe(), "serve", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("meshplan serve: http://"), line
        yield line.split()[2]
    finally:
        p.terminate()
        p.wait(timeout=10)


def api(url, path, body):
    req = urllib.request.Request(
        url + path.lstrip("/"), data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_cli_python_and_web_api_give_identical_numbers(server):
    for kind, sc, fn in (("train", TRAIN, meshplan.train), ("infer", INFER, meshplan.infer)):
        c = cli(kind, *flags(sc))
        status, w = api(server, f"/api/{kind}", {"scenario": sc})
        assert status == 200, w
        same(w["report"], c)
        same(py(fn, sc).to_dict(), c)
        # the web answer's text is the CLI's human output, character for character
        assert w["text"] == cli_text(kind, *flags(sc))
    # and the same error message for the same mistake
    bad = {**TRAIN, "model": {"name": "llama-3-8bb"}}
    status, w = api(server, "/api/train", {"scenario": bad})
    assert status == 400
    with pytest.raises(meshplan.MeshplanError) as e:
        py(meshplan.train, bad)
    assert w["error"] == str(e.value)
    out = subprocess.run([exe(), "train", *flags(bad)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.splitlines()[0] == "error: " + w["error"]


# ---- the page in a real browser ----------------------------------------

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1500",
]


def need(what):
    msg = f"{what}; install chromium and chromium-driver (apt-get install -y chromium chromium-driver) for the browser test"
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI is set: .ci/run installs them)")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        need("chromium or chromedriver not found")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need("the selenium package is not installed (pip install selenium)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for f in CHROMIUM_FLAGS:
        opts.add_argument(f)
    with tempfile.TemporaryDirectory() as profile:
        opts.add_argument(f"--user-data-dir={profile}")
        d = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
        try:
            yield d
        finally:
            d.quit()


def page_state(tab, sc, **extra):
    """The page's URL state (#tab=…&id=value) for a scenario."""
    p = {"tab": tab, "model": sc["model"]["name"], "chip": sc["hardware"]["chip"], "mesh": sc["hardware"]["mesh"]}
    for sec in ("training", "inference", "parallelism"):
        p.update({k: str(v) for k, v in sc.get(sec, {}).items()})
    p.update(extra)
    return "#" + urlencode(p)


def wait_done(d):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(d, 60).until(lambda d: d.find_element("tag name", "body").get_attribute("data-state") == "done")


def shown(d):
    """What the page shows: the report JSON, the document's cells, the plots."""
    from selenium.webdriver.common.by import By

    err = d.find_element(By.ID, "error")
    assert not err.is_displayed(), err.text
    report = json.loads(d.find_element(By.ID, "report-json").get_attribute("textContent"))
    cells = [c.text for c in d.find_elements(By.CSS_SELECTOR, "#doc td.num") if c.text]
    plots = {
        i.get_attribute("data-kind"): d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i)
        for i in d.find_elements(By.CSS_SELECTOR, "#plots img")
    }
    return report, cells, plots


def floats(x):
    """Every number as a float: the page's report went through JavaScript,
    whose one number type writes 2.1588e17 as 215882511044050940."""
    return json.loads(json.dumps(x), parse_int=float)


def screenshot(d, name):
    out = Path(os.environ.get("MESHPLAN_ARTIFACTS", ROOT / "target" / "web-test"))
    out.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(out / name))
    return out / name


def test_page_shows_the_cli_numbers_in_a_real_browser(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = browser
    d.get(server + page_state("train", TRAIN))
    wait_done(d)
    report, cells, plots = shown(d)
    same(floats(report), floats(cli("train", *flags(TRAIN))))
    text = cli_text("train", *flags(TRAIN))
    assert len(cells) > 20 and all(c in text for c in cells), [c for c in cells if c not in text]
    # the H100 plan is predicted: its step timeline is drawn too
    assert plots.keys() == {"memory", "step-time", "timeline"}, plots
    assert all(w > 0 for w in plots.values()), plots
    # legible at the page's size: each plot is shown at (nearly) its own
    # width, so its smallest text, 14/1.24 = 11.29 px in the SVG, is at
    # least 11 px on the screen
    for i in d.find_elements(By.CSS_SELECTOR, "#plots img"):
        shown_px = d.execute_script("return arguments[0].getBoundingClientRect().width", i)
        natural = d.execute_script("return arguments[0].naturalWidth", i)
        smallest = 14 / 1.24 * shown_px / natural
        assert smallest >= 11, (i.get_attribute("data-kind"), shown_px, natural)
    assert screenshot(d, "page-train.png").stat().st_size > 10_000

    # change inputs: the infer tab, a scenario typed into the form
    d.find_element(By.CSS_SELECTOR, "#tabs [data-tab=infer]").click()
    wait_done(d)
    Select(d.find_element(By.ID, "model")).select_by_value(INFER["model"]["name"])
    Select(d.find_element(By.ID, "chip")).select_by_value(INFER["hardware"]["chip"])
    fields = {"mesh": INFER["hardware"]["mesh"], **{k: str(v) for k, v in INFER["inference"].items()}}
    for id_, v in fields.items():
        e = d.find_element(By.ID, id_)
        e.clear()
        e.send_keys(v)
    # typing fires change events that evaluate at once; wait for the last
    d.execute_script("document.body.dataset.state = 'busy'")
    d.find_element(By.ID, "run").click()
    wait_done(d)
    report, cells, plots = shown(d)
    same(floats(report), floats(cli("infer", *flags(INFER))))
    text = cli_text("infer", *flags(INFER))
    assert cells and all(c in text for c in cells), [c for c in cells if c not in text]
    assert plots.keys() == {"roofline", "serving"} and all(w > 0 for w in plots.values()), plots
    # the URL carries the state: a reload shows the same report
    d.refresh()
    wait_done(d)
    assert shown(d)[0] == report

    # a bad input shows the CLI's message
    e = d.find_element(By.ID, "batch")
    e.clear()
    e.send_keys("lots")
    d.execute_script("document.body.dataset.state = 'busy'")
    d.find_element(By.ID, "run").click()
    wait_done(d)
    err = d.find_element(By.ID, "error")
    assert err.is_displayed() and "lots" in err.text, err.text


def test_planner_tab_lists_plans_in_a_real_browser(server, browser):
    from selenium.webdriver.common.by import By

    d = browser
    sc = {
        "model": {"name": "llama-2-13b"},
        "hardware": {"chip": "h100", "mesh": "8x8"},
        "training": {"batch_tokens": "4Mi", "seq_len": 4096},
    }
    # a link opened in the page already showing: the hash changes, the
    # whole form follows it
    d.execute_script("document.body.dataset.state = 'busy'")
    d.get(server + page_state("plan-train", sc, top="5"))
    wait_done(d)
    assert d.find_element(By.ID, "batch").get_attribute("value") == ""
    report, _, plots = shown(d)
    c = cli("plan", "train", *flags(sc), "--top", "5")
    for r in (report, c):
        r.pop("search_time_s")
    same(floats(report), floats(c))
    rows = d.find_elements(By.CSS_SELECTOR, "#doc table:not(.fields) tbody tr")
    assert len(rows) >= 5
    assert "pareto" in plots and plots["pareto"] > 0
    screenshot(d, "page-plan.png")
