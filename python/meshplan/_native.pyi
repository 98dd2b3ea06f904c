"""Type stubs of the Rust extension (crates/meshplan-py). Reports are
returned as their serde JSON text; plots as (kind, SVG) pairs."""

from typing import List, Optional, Tuple

class MeshplanError(Exception):
    """Bad input (unknown name, malformed file, impossible hyperparameters);
    the message is the CLI's."""

Plots = List[Tuple[str, str]]

def model(name: str, seq_len: Optional[int], kv_dtype: Optional[str], causal: bool) -> str: ...
def hw(name: str) -> str: ...
def train(
    scenario_path: Optional[str], overrides: str, trace: bool = ...
) -> Tuple[str, Plots, Optional[str]]: ...
def infer(
    scenario_path: Optional[str],
    overrides: str,
    sweep: bool = ...,
    ttft_slo: Optional[float] = ...,
    tpot_slo: Optional[float] = ...,
) -> Tuple[str, Plots]: ...
def plan_train(
    scenario_path: Optional[str],
    overrides: str,
    objective: str = ...,
    top: int = ...,
    threads: Optional[int] = ...,
) -> Tuple[str, Plots]: ...
def plan_infer(
    scenario_path: Optional[str],
    overrides: str,
    max_chips: Optional[int] = ...,
    objective: str = ...,
    top: int = ...,
    ttft_slo: Optional[float] = ...,
    tpot_slo: Optional[float] = ...,
    threads: Optional[int] = ...,
) -> str: ...
def check(path: str) -> str: ...
def validate(path: str, all: bool = ...) -> str: ...
