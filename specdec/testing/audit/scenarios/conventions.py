r"""Engines' own conventions: their warping, their dtype and device, their reserved ids.

**Warping.** A step audit checks the emitted law against the *warped* target. specdec's
convention is ``specdec.warp.warp_probs``: temperature, then top-k keeping *every* token whose
logit ties the k-th largest (ties at the boundary all kept, as transformers does), then top-p
keeping the smallest prefix of the stably sorted probabilities whose mass reaches ``top_p``
(the crossing token included), then min-p; temperature 0 is the one-hot of the argmax, lowest
id on ties. Engines differ (a top-k keeping exactly ``k`` tokens by ``torch.topk``, a top-p
excluding the crossing token), and such a difference is not a verification bug. Given the
engine's warping (``audit_step(..., target_warp=warp)``, ``warp(logits [N, V], *, temperature,
top_k, top_p) -> probs [N, V]``) the target is the engine's warped law, so the verdict is about
verification given the engine's own target law; separately, the report gives per scenario the
total-variation distance between the ``k+1``-token laws the two warpings define
(``warping_distance``, enumerated in float64: exact up to rounding), and says whether they
differ.

**Inputs** (``engine_scenarios``): reserved ids removed (``reserved``); a verifier given rows
in a narrow dtype gets pairs on the ``1/128`` grid, exact in every dtype (``large.dyadic_pair``);
a step given logits in a narrow dtype has the warping of those rounded logits as its target
(``Scenario.logits_dtype``). ``resolve_device`` refuses a device that is absent.

Example:
    >>> import torch
    >>> from specdec.testing.audit.scenarios.battery import step_scenarios
    >>> def exactly_k(logits, *, temperature, top_k, top_p):  # top-k without boundary ties
    ...     from specdec.warp import warp_probs
    ...     if top_k is None or temperature == 0:
    ...         return warp_probs(logits, temperature=temperature, top_p=top_p)
    ...     kept = torch.topk(logits, top_k, dim=-1).indices
    ...     masked = torch.full_like(logits, -torch.inf).scatter(-1, kept, logits.gather(-1, kept))
    ...     return warp_probs(masked, temperature=temperature, top_p=top_p)
    >>> hot = [s for s in step_scenarios() if s.name == "hot-v5-k3"][0]
    >>> warping_distance(hot, exactly_k) > 0
    True
"""

from collections.abc import Sequence
from dataclasses import replace

import torch

from specdec.testing.audit.contract.scenario import Scenario, WarpFn, warped_rows
from specdec.testing.audit.scenarios.large import dyadic_pair
from specdec.testing.audit.scenarios.reserved import without_reserved
from specdec.testing.stats import joint_law_by_enumeration

__all__ = ["DTYPES", "WARPING_TOLERANCE", "engine_scenarios", "resolve_device", "warping_distance"]

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
"""The dtypes the audit passes rows or logits in (``--dtype``)."""

WARPING_TOLERANCE = 1e-9
"""A warping distance at or below this is float64 rounding, not a different convention."""


def warping_distance(scenario: Scenario, warp: WarpFn) -> float:
    r"""TV between the ``k+1``-token target laws under ``warp`` and under ``warp_probs``.

    .. math:: \tfrac12 \sum_{x_{1..k+1}} \Big| \prod_j \pi_{\mathrm{engine}}(x_j \mid x_{<j})
        - \prod_j \pi_{\mathrm{specdec}}(x_j \mid x_{<j}) \Big|

    both at the scenario's options and logits dtype, enumerated over ``V^(k+1)`` sequences.
    """
    engine = replace(scenario, warping=warp)
    vocab, length = scenario.pair.target.vocab_size, scenario.k + 1
    theirs = joint_law_by_enumeration(
        warped_rows(scenario.pair.target, engine), scenario.prefix, length, vocab
    )
    ours = joint_law_by_enumeration(
        warped_rows(scenario.pair.target, engine, specdec_warping=True),
        scenario.prefix,
        length,
        vocab,
    )
    return float((theirs - ours).abs().sum() / 2)


def resolve_device(device: str | torch.device | None) -> torch.device | None:
    """``None`` (the CPU) or the device asked for, which must be present.

    Raises:
        ValueError: an unknown device, or CUDA asked for where none is present.
    """
    if device is None:
        return None
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}.") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available here.")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}.")
    return resolved


def engine_scenarios(
    scenarios: Sequence[Scenario],
    *,
    step: bool,
    reserved: Sequence[int] = (),
    dtype: torch.dtype | None = None,
    warp: WarpFn | None = None,
) -> list[Scenario]:
    """The scenarios as the engine is handed them (module doc): reserved ids removed, rows
    exact in ``dtype`` (verifier) or logits in ``dtype`` (step), the engine's warping.

    Raises:
        ValueError: ``dtype`` not one of ``DTYPES``; reserved ids leaving fewer than two tokens.
    """
    if dtype is not None and dtype not in DTYPES.values():
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype}.")
    prepared = []
    for scenario in scenarios:
        scenario = without_reserved(scenario, reserved)
        if step:
            scenario = replace(
                scenario,
                logits_dtype=scenario.logits_dtype if dtype is None else dtype,
                warping=scenario.warping if warp is None else warp,
            )
        elif dtype is not None and dtype != torch.float64:
            scenario = replace(scenario, pair=dyadic_pair(scenario.pair))
        prepared.append(scenario)
    return prepared
