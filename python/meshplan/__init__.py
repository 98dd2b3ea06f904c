"""meshplan: the quantitative reasoning of *How To Scale Your Model* (the JAX
Scaling Book) and the *Ultra-Scale Playbook* from Python.

Every function takes what the ``meshplan`` CLI takes — catalog names and
scenario files — calls the same Rust library the CLI calls and returns its
report as a Python object: ``to_dict()`` gives the CLI's ``--json`` object
(SI base units: bytes, FLOPs, seconds), attribute access reads its keys, and
reports with a plot render as SVG in notebooks (``_repr_svg_``). Files are
read and resolved exactly as the CLI reads them (the same Rust code: a
Hugging Face config.json, a model or scenario TOML, ``[model] file = …``
relative to the scenario; regular files of at most 64 MiB). Bad input
raises a :class:`MeshplanError` with the CLI's message, of the subclass
that says what went wrong: :class:`FileError` (missing, unreadable, not a
regular file, too large), :class:`UnknownNameError` (a model or chip name
not in the catalog; also an :class:`InputError`) or :class:`InputError`
(anything else the input gets wrong). Long calls answer Ctrl-C with
``KeyboardInterrupt``.

Notation (the book's): B batch (tokens), T sequence length, S KV length,
D width, F feed-forward width, N query heads, K KV heads, H head dimension,
L layers, V vocabulary, E/k experts/active experts, C peak FLOP/s per chip,
W bandwidth (bytes/s), X/Y/Z mesh axis sizes.

Scenario overrides: ``model=``, ``chip=``, ``chips=`` and ``mesh=`` are the
CLI's ``--model``, ``--hw``, ``--chips`` and ``--mesh``; any other scenario
field is given by section, e.g. ``training={"batch_tokens": "4M"}`` or
``parallelism={"tp": 8, "zero": 1}``, written over the scenario file.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._native import FileError, InputError, MeshplanError, UnknownNameError

__all__ = [
    "MeshplanError",
    "InputError",
    "UnknownNameError",
    "FileError",
    "Report",
    "TrainReport",
    "InferReport",
    "PlanTrainReport",
    "PlanInferReport",
    "model",
    "hw",
    "train",
    "infer",
    "plan_train",
    "plan_infer",
    "check",
    "validate",
]

PathLike = Union[str, "os.PathLike[str]"]  # noqa: F821


class Report(Mapping[str, Any]):
    """A meshplan report: the CLI's ``--json`` object.

    Read it as a mapping (``r["t_math_s"]``), by attribute (``r.t_math_s``) or
    as a plain dict (``r.to_dict()``). ``plots`` maps a plot kind to its SVG.
    """

    def __init__(self, data: Dict[str, Any], plots: Optional[Dict[str, str]] = None):
        self._data = data
        self.plots: Dict[str, str] = dict(plots or {})

    def to_dict(self) -> Dict[str, Any]:
        """The report as the CLI's ``--json`` object (a fresh copy)."""
        return json.loads(json.dumps(self._data))

    def svg(self, kind: Optional[str] = None) -> str:
        """The SVG plot of ``kind`` (default: the first one)."""
        if not self.plots:
            raise MeshplanError(f"{type(self).__name__} has no plot")
        if kind is None:
            return next(iter(self.plots.values()))
        try:
            return self.plots[kind]
        except KeyError:
            raise MeshplanError(
                f"no plot '{kind}': {', '.join(self.plots)}"
            ) from None

    def _repr_svg_(self) -> Optional[str]:
        return next(iter(self.plots.values()), None)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        keys = ", ".join(f"{k}={self._data[k]!r}" for k in ("model", "chip", "chips") if k in self._data)
        return f"{type(self).__name__}({keys})"


class TrainReport(Report):
    """``meshplan train``: memory per device, collectives, T_math, T_comms,
    bubble and step-time bounds. Plots: ``memory``, ``step-time`` and, with a
    prediction, ``timeline`` (one predicted step by stage and stream).
    ``trace`` is the Chrome/Perfetto trace of that step (a dict) when
    ``train(..., trace=...)`` asked for it."""

    trace: Optional[Dict[str, Any]] = None


class InferReport(Report):
    """``meshplan infer``: KV cache, B_crit, decode/prefill rooflines, TTFT,
    TPOT, tokens/s and cost. Plots: ``roofline``, and ``serving`` (TPOT, TTFT
    and tokens/s vs B) when ``sweep=True``."""


def _frame(rows: List[Dict[str, Any]]) -> Any:
    try:
        import pandas as pd  # type: ignore
    except ImportError:
        return rows
    return pd.json_normalize(rows, max_level=1)


class PlanTrainReport(Report):
    """``meshplan plan train``: the ranked plans. ``plans`` is a pandas
    DataFrame (one row per plan) when pandas is installed, else a list of
    dicts. Plots: ``pareto`` (step time vs memory per device),
    ``pareto-cost``."""

    @property
    def plans(self) -> Any:
        return _frame(self._data.get("plans", []))


class PlanInferReport(Report):
    """``meshplan plan infer``: the ranked serving plans (``plans`` as for
    :class:`PlanTrainReport`)."""

    @property
    def plans(self) -> Any:
        return _frame(self._data.get("plans", []))


def _overrides(
    model: Optional[PathLike],
    chip: Optional[str],
    chips: Optional[Union[int, str]],
    mesh: Optional[str],
    sections: Mapping[str, Any],
) -> str:
    known = {"model", "hardware", "training", "inference", "parallelism"}
    bad = sorted(set(sections) - known)
    if bad:
        raise InputError(
            f"unknown scenario section(s) {', '.join(bad)}: {', '.join(sorted(known))}"
        )
    over: Dict[str, Dict[str, Any]] = {k: dict(v) for k, v in sections.items()}
    if model is not None:
        # a catalog name or a model file (config.json, model/scenario TOML)
        over.setdefault("model", {})["name"] = _path(model)
    hw_ = over.setdefault("hardware", {})
    if chip is not None:
        hw_["chip"] = chip
    if mesh is not None:
        hw_["mesh"] = mesh
    elif chips is not None:
        hw_["chips"] = chips
    return json.dumps({k: v for k, v in over.items() if v})


Duration = Union[float, int, str, "datetime.timedelta"]  # noqa: F821


def _request(**fields: Any) -> str:
    """Keyword arguments as the JSON of a core request: ``None`` is left
    out (the core's default applies); an SLO may be seconds, text ("50ms")
    or a ``timedelta``. Non-finite seconds travel as text ("inf", "nan"),
    which JSON cannot carry, so the core refuses them with its one SLO
    message rather than a JSON error."""
    import datetime
    import math

    out: Dict[str, Any] = {}
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, datetime.timedelta):
            v = v.total_seconds()
        if isinstance(v, float) and not math.isfinite(v):
            v = repr(v)
        out[k] = v
    return json.dumps(out)


def _path(p: Optional[PathLike]) -> Optional[str]:
    import os

    return None if p is None else os.fspath(p)


def _load(pair: Tuple[str, List[Tuple[str, str]]]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    text, plots = pair
    return json.loads(text), dict(plots)


def model(
    name: PathLike,
    *,
    seq_len: Optional[Union[int, str]] = None,
    kv_dtype: Optional[str] = None,
    causal: bool = True,
) -> Report:
    """``meshplan model show NAME``: exact parameter counts (total, active,
    embedding, per layer), FLOPs per token (forward 2·P + attention, training
    6·P) and the KV cache per token 2·K·H·L·bytes_kv at T = ``seq_len``.
    ``name`` is a catalog name or a model file (a Hugging Face config.json,
    a model or scenario TOML), as on the command line; ``seq_len`` a count
    (4096) or the CLI's text ("32k" = 32,000, "32Ki" = 32,768)."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, str, type(None))):
        raise InputError(f"seq_len must be a whole token count or text like '32Ki', not {seq_len!r}")
    text = None if seq_len is None else str(seq_len)
    return Report(json.loads(_native.model(_path(name), text, kv_dtype, causal)))


def hw(name: PathLike) -> Report:
    """``meshplan hw show CHIP``: C per dtype, HBM, W_hbm, ICI/NVLink W and
    the critical intensities C/W. ``name`` is a catalog name or a chip TOML."""
    return Report(json.loads(_native.hw(_path(name))))


def train(
    scenario: Optional[PathLike] = None,
    *,
    model: Optional[PathLike] = None,
    chip: Optional[str] = None,
    chips: Optional[Union[int, str]] = None,
    mesh: Optional[str] = None,
    trace: Optional[PathLike] = None,
    **sections: Mapping[str, Any],
) -> TrainReport:
    """``meshplan train``: one training configuration — memory per device
    (params, grads, optimizer, activations) against HBM, T_math =
    6·P·B/(N·C) (with remat), each collective over its axis, the pipeline
    bubble (p−1)/(m·v+p−1), and the step time between max(T_math, T_comms)
    and T_math + ΣT_comms. ``trace="step.json"`` also writes the predicted
    step as a Chrome/Perfetto trace (``--trace``; without a prediction it
    raises :class:`MeshplanError` with the reason)."""
    over = _overrides(model, chip, chips, mesh, sections)
    text, plots, chrome = _native.train(_path(scenario), over, trace is not None)
    r = TrainReport(json.loads(text), dict(plots))
    if trace is not None and chrome is not None:
        _write_new(trace, chrome, [scenario])
        r.trace = json.loads(chrome)
    return r


def _write_new(path: PathLike, text: str, inputs: List[Optional[PathLike]]) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it,
    renamed over it), never over one of the call's input files."""
    import os
    import tempfile

    target = os.fspath(path)
    for i in inputs:
        if i is not None and os.path.exists(target) and os.path.samefile(i, target):
            raise MeshplanError(
                f"trace: {target} is an input of this call; refusing to overwrite it"
            )
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".meshplan-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def infer(
    scenario: Optional[PathLike] = None,
    *,
    model: Optional[PathLike] = None,
    chip: Optional[str] = None,
    chips: Optional[Union[int, str]] = None,
    mesh: Optional[str] = None,
    sweep: bool = False,
    ttft_slo: Optional[Duration] = None,
    tpot_slo: Optional[Duration] = None,
    **sections: Mapping[str, Any],
) -> InferReport:
    """``meshplan infer``: serving at batch B and context S — weights and
    B·KV per chip, B_crit, decode step B·KV/(N·W_hbm) + max(2·B·P/(N·C),
    P·bytes_w/(N·W_hbm)) plus comms, TTFT, tokens/s and cost. ``sweep=True``
    adds the ``serving`` plot (B = 1, 2, 4, … with the SLO lines: seconds,
    "50ms" or a timedelta, checked as the CLI checks them)."""
    data, plots = _load(
        _native.infer(
            _path(scenario),
            _overrides(model, chip, chips, mesh, sections),
            sweep,
            _request(ttft_slo=ttft_slo, tpot_slo=tpot_slo),
        )
    )
    return InferReport(data, plots)


def plan_train(
    scenario: Optional[PathLike] = None,
    *,
    model: Optional[PathLike] = None,
    chip: Optional[str] = None,
    chips: Optional[Union[int, str]] = None,
    mesh: Optional[str] = None,
    objective: str = "time",
    top: int = 10,
    threads: Optional[int] = None,
    max_global_batch: Optional[Union[int, str]] = None,
    dtypes: Optional[Union[str, Sequence[str]]] = None,
    allow_fp8: bool = False,
    **sections: Mapping[str, Any],
) -> PlanTrainReport:
    """``meshplan plan train``: every (dp, fsdp, tp, pp, cp, ep) factorization
    of the chips with ZeRO, remat, schedule and micro-batches, ranked by
    ``objective`` (time | cost | memory-headroom); the ``top`` plans.

    Off unless asked, as ``--max-global-batch``, ``--dtypes`` and
    ``--allow-fp8``: ``max_global_batch`` (tokens, ``"16Mi"`` or ``"2048
    seqs"``) also searches the batch B, 2B, … up to it (plans ranked per
    token; each plan's ``variant`` has its batch, tokens/s and time to N
    tokens); ``dtypes`` (``"bf16,fp8"`` or a list) the compute dtypes;
    ``allow_fp8`` adds fp8 where the chip and framework support it."""
    search: Dict[str, Any] = {}
    if max_global_batch is not None:
        search["max_global_batch"] = str(max_global_batch)
    if dtypes is not None:
        search["dtypes"] = dtypes if isinstance(dtypes, str) else ",".join(dtypes)
    if allow_fp8:
        search["allow_fp8"] = True
    data, plots = _load(
        _native.plan_train(
            _path(scenario),
            _overrides(model, chip, chips, mesh, sections),
            objective,
            top,
            threads,
            json.dumps(search),
        )
    )
    return PlanTrainReport(data, plots)


def plan_infer(
    scenario: Optional[PathLike] = None,
    *,
    model: Optional[PathLike] = None,
    chip: Optional[str] = None,
    chips: Optional[Union[int, str]] = None,
    mesh: Optional[str] = None,
    max_chips: Optional[Union[int, str]] = None,
    objective: Optional[str] = None,
    top: Optional[int] = None,
    ttft_slo: Optional[Duration] = None,
    tpot_slo: Optional[Duration] = None,
    allow_quantization: Optional[bool] = None,
    explain_rank: Optional[int] = None,
    threads: Optional[int] = None,
    disagg: Optional[str] = None,
    **sections: Mapping[str, Any],
) -> PlanInferReport:
    """``meshplan plan infer``: serving plans (slice, Y, Z, dtypes, B) meeting
    the TTFT/TPOT SLOs (seconds, "50ms" or a timedelta), ranked by
    ``objective`` (throughput | cost | latency). Left out, ``objective``,
    ``top`` and the request lengths take the core's serving defaults, as in
    the CLI and the web API (docs/inference.md). A bf16 model is searched in
    bf16 unless ``allow_quantization=True`` (``--allow-quantization``) or the
    scenario names its dtypes. ``disagg`` (``--disagg``): "off" (default),
    "on" (aggregated and disaggregated prefill/decode pools) or "only"."""
    text = _native.plan_infer(
        _path(scenario),
        _overrides(model, chip, chips, mesh, sections),
        _request(
            max_chips=max_chips,
            objective=objective,
            top=top,
            ttft_slo=ttft_slo,
            tpot_slo=tpot_slo,
            allow_quantization=allow_quantization,
            explain_rank=explain_rank,
            threads=threads,
            disagg=disagg,
        ),
    )
    return PlanInferReport(json.loads(text))


def check(claims: PathLike) -> Report:
    """``meshplan check CLAIMS``: each numeric claim of a worked solution
    against meshplan's value, with a verdict and a hint for common slips."""
    return Report(json.loads(_native.check(_path(claims))))


def validate(*datasets: PathLike, all: bool = False) -> Report:
    """``meshplan validate DATASET...``: predicted step time, MFU and peak
    memory against measured runs (Playbook CSVs or published-runs JSON), with
    the error summary; with two or more sources the report's ``held_out``
    gives the leave-one-source-out figures beside the in-sample ones.
    ``all=True`` lists every run."""
    if not datasets:
        raise TypeError("validate() needs at least one dataset")
    paths = [_path(d) for d in datasets]
    return Report(json.loads(_native.validate(paths, all)))
