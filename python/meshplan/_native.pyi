"""Type stubs of the Rust extension (crates/meshplan-py). Reports are
returned as their serde JSON text; plots as (kind, SVG) pairs."""

from typing import List, Optional, Tuple

class MeshplanError(Exception):
    """Bad input (unknown name, malformed file, impossible hyperparameters);
    the message is the CLI's."""

class InputError(MeshplanError):
    """Input meshplan cannot use (malformed file or value, bad unit, …)."""

class UnknownNameError(InputError):
    """A model, chip or other catalog name that does not exist."""

class FileError(MeshplanError):
    """A file that cannot be read (missing, not a regular file, > 64 MiB)."""

Plots = List[Tuple[str, str]]

def model(name: str, seq_len: Optional[str], kv_dtype: Optional[str], causal: bool) -> str: ...
def hw(name: str) -> str: ...
def train(
    scenario_path: Optional[str], overrides: str, trace: bool = ...
) -> Tuple[str, Plots, Optional[str]]: ...
def infer(
    scenario_path: Optional[str],
    overrides: str,
    sweep: bool = ...,
    slos: str = ...,
) -> Tuple[str, Plots]: ...
def plan_train(
    scenario_path: Optional[str],
    overrides: str,
    objective: str = ...,
    top: int = ...,
    threads: Optional[int] = ...,
    search: str = ...,
) -> Tuple[str, Plots]: ...
def plan_infer(scenario_path: Optional[str], overrides: str, request: str = ...) -> str: ...
def check(path: str) -> str: ...
def validate(path: str, all: bool = ...) -> str: ...
