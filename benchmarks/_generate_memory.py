"""``bench_generate``'s peak memory: one generation per fresh process, its peak resident set.

``memory_child`` runs inside the child process (``bench_generate.py --memory-child MODES``):
after loading the models, a short warm-up generation, ``gc.collect()`` and glibc's
``malloc_trim(0)``, it writes ``5`` to ``/proc/self/clear_refs`` (resetting ``VmHWM`` to the
current ``VmRSS``), generates, and reads ``VmHWM``; where ``clear_refs`` is not writable it
falls back to ``ru_maxrss``. ``measure_memory`` starts one child per method and compares each
peak with the autoregressive one of the same library.
"""

import ctypes
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._generate_setup import (
    Settings,
    load_target,
    make_draft,
    own_bytes,
    run_specdec,
    run_transformers,
    transformers_options,
)
from specdec.models import HFModel

__all__ = ["GOAL_MEMORY", "measure_memory", "memory_child"]

GOAL_MEMORY = 1.2  # speculative peak <= 1.2 x autoregressive peak
WARMUP_TOKENS = 4


def read_status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def malloc_trim() -> None:
    """Hand freed heap pages back to the kernel (glibc only; a no-op elsewhere), so the next
    peak shows the generation rather than memory a warm-up freed."""
    try:
        libc: Any = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.malloc_trim(0)


def memory_child(settings: Settings) -> list[dict[str, Any]]:
    """Peak resident memory of one generation per mode of ``settings.memory_child`` (``ar``,
    ``spec``, ``hf_ar``, ``hf_assisted``; --quick measures two modes in one child)."""
    modes = (settings.memory_child or "").split(",")
    model, prompts, eos = load_target(settings)
    target = HFModel(model)
    needs_draft = any(mode in ("spec", "hf_assisted") for mode in modes)
    draft, draft_model = (
        make_draft(model, settings.draft, settings) if needs_draft else (None, None)
    )

    def generate(mode: str, count: int) -> None:
        if mode in ("ar", "spec"):
            chosen = draft if mode == "spec" else None
            run_specdec(target, chosen, prompts[0], settings.k, eos, count)
        else:
            extra = {}
            if mode == "hf_assisted":
                extra = transformers_options(draft_model, settings.draft, settings.k)
            run_transformers(model, extra, prompts[0], count)

    reports = []
    for mode in modes:
        generate(mode, WARMUP_TOKENS)  # one-time allocations (thread pools) are not the run's
        gc.collect()
        malloc_trim()
        before = read_status("VmRSS")
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current VmRSS
            method = "VmHWM after clear_refs"
        except OSError:
            method = "ru_maxrss (peak since start)"
        generate(mode, settings.new_tokens)
        if method.startswith("VmHWM"):
            peak = read_status("VmHWM")
        else:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        own = own_bytes(draft_model, model) if draft_model is not None else 0
        reports.append(
            {
                "mode": mode,
                "method": method,
                "before": before,
                "peak": peak,
                "draft_own_bytes": own if mode in ("spec", "hf_assisted") else 0,
            }
        )
    return reports


def measure_memory(settings: Settings, script: Path) -> list[dict[str, Any]]:
    """One child process of ``script`` per method (autoregressive and speculative per draft,
    for both libraries; --quick: one child for both specdec modes), each entry with its peak
    over the same library's autoregressive peak, over that plus the draft's own weights, and
    the generation's working memory (peak less the resident memory before it)."""
    k = max(settings.ks)
    cases = [("ar", "-")] + [("spec", name) for name in settings.drafts]
    cases += [("hf_ar", "-")] + [("hf_assisted", name) for name in settings.drafts]
    if settings.quick:
        cases = [("ar,spec", "bf16")]  # one child for the smoke test (imports take seconds)
    memory: list[dict[str, Any]] = []
    for modes, name in cases:
        command = [sys.executable, str(script), "--memory-child", modes, "--k", str(k)]
        command += ["--draft", name] if name != "-" else []
        command += ["--quick"] if settings.quick else []
        command += ["--threads", str(settings.threads)] if settings.threads else []
        command += ["--ngram-min", str(settings.ngram_min)]
        child = subprocess.run(command, capture_output=True, text=True, check=True)
        for report in json.loads(child.stdout.strip().splitlines()[-1]):
            draft_name = name if report["mode"] in ("spec", "hf_assisted") else "-"
            memory.append({**report, "draft": draft_name, "k": k})
    for entry in memory:
        base_mode = "hf_ar" if entry["mode"][:2] == "hf" else "ar"
        base = next(m for m in memory if m["mode"] == base_mode)
        entry["peak_ratio"] = entry["peak"] / base["peak"]
        entry["peak_over_ar_plus_draft"] = entry["peak"] / (base["peak"] + entry["draft_own_bytes"])
        entry["working"] = entry["peak"] - entry["before"]
        base_working = base["peak"] - base["before"]
        entry["working_ratio"] = entry["working"] / base_working if base_working >= 2**20 else None
        entry["goal_memory"] = entry["peak_ratio"] <= GOAL_MEMORY
    return memory
