"""The dtype a verifier computes in, seen from its own ops rather than asked of the user.

The exact audit judges a law against the rounding bound of the dtype the function computes in
(``specdec.discover.rounding_bound``): a correct verifier that casts its rows to float32, or
draws float32 uniforms (``torch.rand`` on the ``2^-24`` grid), is within float32's bound of the
target's law but not within float64's. Which dtype that is, the function's ops say: under
``DtypeWatch``, a ``torch`` dispatch mode, every op's floating results are recorded, and
``seen_dtype`` runs a verifier on a few seeded value vectors of a scenario's first draft block
and names the narrowest float dtype its ops computed in (float64 when it ran none). The exact
audit then uses that dtype's bound, unless ``dtype=`` (``--dtype``) says otherwise, and says so:
"LOSSLESS up to float32 rounding (float32 ops seen)". An outcome the target forbids stays
LOSSY at any dtype (``specdec.discover.exact_verdict``).

The probe is evidence, not proof: an op in a narrower dtype on a path no probe took is not
seen (the audit then judges against the wider dtype's bound: stricter, never looser).

Example:
    >>> import torch
    >>> with DtypeWatch() as watch:
    ...     _ = torch.ones(2, dtype=torch.float64).float() * 2
    >>> narrowest(watch.seen)
    'float32'
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from specdec._dispatch import DispatchMode
from specdec.exact import BlockRows, draft_law
from specdec.models.toy import ToyModel
from specdec.testing.audit.contract.scenario import Scenario

__all__ = ["PROBES", "DtypeWatch", "first_block", "narrowest", "narrowest_of", "seen_dtype"]

_ORDER = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}
_NAMES = {torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
          torch.bfloat16: "bfloat16"}  # fmt: skip

PROBES = 32
"""Value vectors per probe (seeded, one call of a batched rule; row by row otherwise)."""


class DtypeWatch(DispatchMode):
    """Records the float dtypes of every op's tensor results (``seen``)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.seen: set[torch.dtype] = set()

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, Tensor) and value.dtype in _ORDER:
                self.seen.add(value.dtype)
        return out


def narrowest(dtypes: Iterable[torch.dtype]) -> str:
    """The name of the float dtype of fewest significand bits among ``dtypes`` (``float64``
    when there is none)."""
    floats = [d for d in dtypes if d in _ORDER]
    return _NAMES[min(floats, key=lambda d: _ORDER[d])] if floats else "float64"


def seen_dtype(
    rule: Callable[[Tensor, Tensor, Tensor, Tensor], Any],
    rows: BlockRows,
    values: int,
    *,
    seed: int = 0,
    probes: int = PROBES,
) -> str:
    """The narrowest float dtype ``rule`` computes in on ``rows`` (module docstring).

    Args:
        rule: a rule of explicit values (a ``VerifyRule``, or a captured verifier,
            ``specdec.testing.capture.CapturedRule``), called on a batch of ``probes`` rows.
        rows: the draft block and its rows.
        values: the values per row (``k + 1`` uniforms; a captured verifier's draws).
        seed: seed of the value vectors (the first is all ``1/2``).
        probes: how many value vectors.

    Returns:
        ``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"``. A call that raises
        (the audit reports it where it runs the rule) counts the ops it ran before.
    """
    generator = torch.Generator().manual_seed(seed)
    uniforms = torch.rand(probes, max(values, 1), generator=generator, dtype=torch.float64)
    uniforms[0] = 0.5
    tokens = torch.tensor(rows.draft_tokens, dtype=torch.int64)
    draft, target = (
        torch.tensor([[float(v) for v in r] for r in side], dtype=torch.float64)
        for side in (rows.draft_rows, rows.target_rows)
    )
    watch = DtypeWatch()
    try:
        with watch:
            rule(
                tokens.expand(probes, -1),
                draft.expand(probes, -1, -1),
                target.expand(probes, -1, -1),
                uniforms,
            )
    except Exception:
        pass
    return narrowest(watch.seen)


def first_block(target: ToyModel, draft: ToyModel, prefix: Sequence[int], k: int) -> BlockRows:
    """The most likely draft block after ``prefix`` and the exact rows a rule sees for it."""
    drafts = max(draft_law(draft, tuple(prefix), k).items(), key=lambda item: item[1])[0]
    contexts = [(*prefix, *drafts[:i]) for i in range(k + 1)]
    return BlockRows(
        draft_tokens=drafts,
        draft_rows=tuple(draft.probs(c) for c in contexts[:k]),
        target_rows=tuple(target.probs(c) for c in contexts),
    )


def narrowest_of(
    rule: Callable[[Tensor, Tensor, Tensor, Tensor], Any],
    scenarios: Sequence[Scenario],
    values: int | Callable[[BlockRows], int],
) -> str:
    """The narrowest float dtype ``rule``'s ops compute in over ``scenarios`` (each probed
    on its most likely draft block, ``seen_dtype``), ``values`` per row (or a function of
    the block giving them)."""
    seen = []
    for scenario in scenarios:
        rows = first_block(scenario.pair.target, scenario.pair.draft, scenario.prefix,
                           scenario.k)  # fmt: skip
        width = values(rows) if callable(values) else values
        seen.append(getattr(torch, seen_dtype(rule, rows, width)))
    return narrowest(seen)
