r"""Measurement helpers shared by the benchmark programs.

Every benchmark reports timings and never asserts them; these helpers turn wall-clock
measurements into the numbers of its table and JSON, the same way in every program:

* ``timed``: the result of one call and its wall seconds (``time.perf_counter``).
* ``load_average`` and ``environment``: what the machine was doing and what it is (torch,
  Python, threads), recorded beside every run, since other processes on a shared machine slow
  everything and no table can undo that.
* ``geometric_mean``, ``t_interval`` and ``geometric_mean_interval``: a ratio of two speeds is
  summarised by the geometric mean of its units (prompts, or settings) with a 95% Student t
  interval on their log ratios,

  .. math::
      \exp\Big(\bar\ell \pm t_{0.975,\, n-1} \, s_\ell / \sqrt{n}\Big),
      \qquad \ell_i = \log(\text{mine}_i / \text{theirs}_i),

  the units being independent (``(nan, nan)`` with fewer than two).
* ``Ledger``: forward hooks on transformers modules counting each top-level model call, its
  width and the seconds inside it; the rest of a generation's time is the library's own work.
* ``chat_prompts``: chat questions as token ids through a tokenizer's chat template.
* ``write_json``: a results dictionary as indented JSON, parent folders created.
* ``OUT_DIR``: where the programs write by default: ``benchmarks/out/`` in a checkout; from the
  copy a wheel installs (no ``pyproject.toml`` above ``benchmarks/``), ``specdec-bench-out/`` in
  the current folder, never inside the installed package.
"""

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import scipy.stats
import torch
from torch import Tensor, nn

__all__ = [
    "OUT_DIR",
    "Ledger",
    "chat_prompts",
    "environment",
    "geometric_mean",
    "geometric_mean_interval",
    "load_average",
    "t_interval",
    "timed",
    "write_json",
]

Result = TypeVar("Result")
CONFIDENCE = 0.95
_HERE = Path(__file__).resolve().parent
_CHECKOUT = (_HERE.parent / "pyproject.toml").is_file()
OUT_DIR = _HERE / "out" if _CHECKOUT else Path("specdec-bench-out")  # module docstring


def timed(call: Callable[..., Result], *call_args: Any, **call_kwargs: Any) -> tuple[Result, float]:
    """The result of ``call(*call_args, **call_kwargs)`` and its wall seconds."""
    start = time.perf_counter()
    result = call(*call_args, **call_kwargs)
    return result, time.perf_counter() - start


def load_average() -> float | None:
    """The 1-minute load average, rounded to 2 digits (``None`` where the platform has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def environment(quick: bool) -> dict[str, Any]:
    """The software and thread count a run measured, the first fields of every results JSON."""
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "quick": quick,
    }


def geometric_mean(values: Iterable[float]) -> float:
    """``exp(mean(log(values)))`` of positive values."""
    return math.exp(statistics.fmean(math.log(value) for value in values))


def t_interval(logs: Sequence[float]) -> tuple[float, float]:
    """A 95% Student t interval for the geometric mean ratio ``exp(mean(logs))``, the log
    ratios being the independent units (``(nan, nan)`` with fewer than 2)."""
    if len(logs) < 2:
        return math.nan, math.nan
    quantile = scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1)
    half = quantile * statistics.stdev(logs) / len(logs) ** 0.5
    centre = statistics.fmean(logs)
    return math.exp(centre - half), math.exp(centre + half)


def geometric_mean_interval(ratios: Sequence[float]) -> tuple[float, float, float]:
    """The geometric mean of positive ratios and its 95% t interval (``t_interval``), the
    ratios being the independent units: ``(mean, low, high)``."""
    logs = [math.log(ratio) for ratio in ratios]
    low, high = t_interval(logs)
    return math.exp(statistics.fmean(logs)), low, high


class Ledger:
    """What one generation asked of the models: every top-level forward call of the target and
    of the draft models (their width, the new positions it reads) and the wall seconds spent
    inside them, from forward hooks on the transformers modules; the rest of a generation's
    time is the library's own work around the model calls (the same hooks time both
    libraries). A draft with no model (``ngram``) has no calls: its lookups count as the
    library's own work. The hooks stay registered for the modules' lifetime."""

    def __init__(self, target_model: nn.Module, others: Sequence[nn.Module]) -> None:
        self.widths: dict[str, list[int]] = {"target": [], "draft": []}
        self.seconds = 0.0
        self._started: list[float] = []
        roles = [("target", target_model)] + [("draft", other) for other in others]
        for role, module in roles:
            module.register_forward_pre_hook(self._enter(role), with_kwargs=True)
            module.register_forward_hook(self._leave)

    def _enter(self, role: str) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], None]:
        def enter(_: Any, call_args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", call_args[0] if call_args else None)
            self.widths[role].append(int(ids.shape[1]) if isinstance(ids, Tensor) else 0)
            self._started.append(time.perf_counter())

        return enter

    def _leave(self, *_: Any) -> None:
        elapsed = time.perf_counter() - self._started.pop()
        if not self._started:  # an outermost call (a draft sharing modules nests none here)
            self.seconds += elapsed

    def clear(self) -> None:
        """Forget the calls so far: the next generation starts a fresh account."""
        self.widths = {"target": [], "draft": []}
        self.seconds = 0.0

    def summary(self) -> dict[str, Any]:
        """Calls and positions read per model, and seconds inside the models' forward."""
        return {
            "target_widths": list(self.widths["target"]),
            "draft_calls": len(self.widths["draft"]),
            "draft_positions": sum(self.widths["draft"]),
            "forward_s": self.seconds,
        }


def chat_prompts(tokenizer: Any, questions: Iterable[str]) -> list[Tensor]:
    """Each question as one user turn of the tokenizer's chat template, ready for the
    assistant's answer: token ids ``[1, seq]``."""
    prompts = []
    for question in questions:
        encoded: Any = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True,
            return_dict=True,
            return_tensors="pt",
        )
        prompts.append(encoded["input_ids"])
    return prompts


def write_json(path: Path, results: dict[str, Any]) -> None:
    """``results`` as JSON indented by 2 at ``path``, its folder created if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
