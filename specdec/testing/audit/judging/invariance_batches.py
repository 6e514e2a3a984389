"""The batches a row is run in by the invariance check, and the calls that run them.

``specdec.testing.audit.judging.invariance`` (its module docstring) compares each audited row alone
and inside mixed batches. This module is what a batch is: its layout (``BatchContext``, one
letter per row: ``A`` audited, ``G`` greedy, ``F`` another pair's sampled row, ``O`` another
prefix), the rows of each kind drawn for it (``layout_batches``), the per-row generators of a
function taking ``generators`` (``row_generators``), and the call of the audited function on a
batch (``Caller``), checked like any call of the audit.

Example:
    >>> [context.layout for context in STEP_CONTEXTS]
    ['AAAAAAAAAAAAAAAA', 'OAOAOAOA', 'AOOAOOAOOAOOAOO']
"""

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from specdec._checks import check_emitted_blocks
from specdec.models.toy import make_toy_pair
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.drawer import chunk_seed
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.scenario import Scenario, scenario_logits
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.running.run import InvalidOutputError
from specdec.testing.simulate import draft_batch

__all__ = [
    "SEEDED_CONTEXTS",
    "STEP_CONTEXTS",
    "VERIFIER_CONTEXTS",
    "BatchContext",
    "Caller",
    "Rows",
    "layout_batches",
    "row_generators",
    "takes_generators",
]


@dataclass(frozen=True)
class BatchContext:
    """A batch a row is run in.

    Attributes:
        name: printed in reports.
        description: the batch in words.
        layout: one letter per row: ``A`` an audited row, ``G`` a greedy row (one-hot rows of
            another toy pair), ``F`` a sampled row of another toy pair (same ``k`` and ``V``),
            ``O`` (steps) a row with another prefix of the same length.
        seeded_companions: (functions taking ``generators``) the other rows seeded too; else
            they are unseeded (``None``). Audited rows are always seeded there.
    """

    name: str
    description: str
    layout: str
    seeded_companions: bool = False


VERIFIER_CONTEXTS = (
    BatchContext("batch-16", "16 rows of the scenario (another batch size)", "A" * 16),
    BatchContext("behind-greedy", "behind greedy rows: G A G A G A G A", "GA" * 4),
    BatchContext("behind-other", "behind another pair's sampled rows: F A F A ...", "FA" * 4),
    BatchContext("first-of-mixed", "first, then greedy and other rows: A G F A G F ...", "AGF" * 5),
)
"""The batches of a verifier's rows (with ``generators``: the ``F`` rows unseeded)."""

SEEDED_CONTEXTS = (
    BatchContext(
        "seeded-among-seeded", "behind seeded rows of another pair: F A F A ...", "FA" * 4, True
    ),
)
"""Added for a function taking ``generators``."""

STEP_CONTEXTS = (
    BatchContext("batch-16", "16 rows of the scenario (another batch size)", "A" * 16),
    BatchContext("behind-other", "behind rows with another prefix: O A O A ...", "OA" * 4),
    BatchContext("first-of-mixed", "first, then rows with another prefix: A O O ...", "AOO" * 5),
)
"""The batches of a step's rows (one temperature per call: no greedy rows beside sampled)."""


def takes_generators(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes per-row generators (a parameter named ``generators``)."""
    try:
        return "generators" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


Rows = tuple[Tensor, ...]
"""A batch's inputs: ``(tokens [B, k], draft [B, k, V], target [B, k+1, V])`` for a verifier,
``(prefix [B, L],)`` for a step."""


class Caller:
    """Calls the subject on a batch's rows; the rows of several kinds drawn for a layout."""

    def __init__(self, subject: Subject, options: AuditOptions) -> None:
        self.step = subject.level == "step"
        self.fn: Callable[..., Any] = blamed(
            subject.fn if self.step else subject.verifier(), "function"
        )
        self.seeds = takes_generators(subject.fn) and subject.form != "rule"
        self.dtype = options.dtype

    def rows(self, scenario: Scenario, kind: str, size: int, data: torch.Generator) -> Rows:
        """``size`` rows of ``kind`` (a layout letter) for ``scenario``."""
        if self.step:
            prefix = scenario.prefix
            if kind == "O":
                vocab = scenario.pair.target.vocab_size
                prefix = tuple((token + 1) % vocab for token in prefix)
            return (torch.tensor(prefix, dtype=torch.int64).expand(size, -1),)
        pair, prefix = scenario.pair, scenario.prefix
        if kind in ("F", "G"):
            pair, prefix = _other_pair(pair.target.vocab_size), (0,)
        batch = draft_batch(pair.target, pair.draft, prefix, scenario.k, size, data)
        tokens, draft, target = batch.tokens, batch.draft_probs, batch.target_probs
        if kind == "G":  # temperature 0: one-hot rows at the argmax, the draft's argmax drafted
            draft = _one_hot(draft)
            target = _one_hot(target)
            tokens = draft.argmax(dim=-1)
        return tokens, draft, target

    def call(
        self,
        scenario: Scenario,
        rows: Rows,
        generator: torch.Generator,
        generators: Sequence[torch.Generator | None] | None,
        *,
        checked: bool = True,
    ) -> Tensor:
        """The blocks ``[B, k+1]``, checked (``checked=False``: only their type and shape, the
        caller checks the values of many calls at once with ``check_emitted_blocks``)."""
        size, k, vocab = rows[0].shape[0], scenario.k, scenario.pair.target.vocab_size
        extra: dict[str, Any] = {} if generators is None else {"generators": list(generators)}
        if self.step:
            s = scenario
            target, draft = _logits(s, s.pair.target), _logits(s, s.pair.draft)
            out = self.fn(
                target, draft, rows[0], k, generator,
                temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, **extra,
            )  # fmt: skip
        else:
            tokens, draft_probs, target_probs = rows
            if self.dtype is not None:
                draft_probs, target_probs = draft_probs.to(self.dtype), target_probs.to(self.dtype)
            out = self.fn(tokens, draft_probs, target_probs, generator, **extra)
        if isinstance(out, Tensor):
            out = out.cpu()
        if (
            not checked
            and isinstance(out, Tensor)
            and out.shape == (size, k + 1)
            and out.dtype in (torch.int64, torch.int32)
        ):
            return out
        return check_emitted_blocks(out, size, k, vocab, InvalidOutputError)


def _one_hot(rows: Tensor) -> Tensor:
    """Each row one-hot at its argmax (lowest index on ties): the row at temperature 0."""
    return torch.nn.functional.one_hot(rows.argmax(dim=-1), rows.shape[-1]).to(rows.dtype)


def _other_pair(vocab: int) -> Any:
    """Another toy pair with the same vocabulary (rows of another scenario)."""
    return make_toy_pair(vocab, seed=10_007 + vocab, closeness=Fraction(1, 2), zero_rate=0.2)


def _logits(scenario: Scenario, model: Any) -> Callable[[Tensor], Tensor]:
    return lambda ids: scenario_logits(model, scenario, ids.long().cpu())


def layout_batches(
    caller: Caller, scenario: Scenario, layout: str, calls: int, data: torch.Generator
) -> list[Rows]:
    """``calls`` batches of ``layout``, each row of its kind drawn afresh."""
    drawn = {
        kind: caller.rows(scenario, kind, calls * layout.count(kind), data) for kind in set(layout)
    }
    used = dict.fromkeys(drawn, 0)
    batches: list[list[Rows]] = [[] for _ in range(calls)]
    for call in range(calls):
        for kind in layout:
            i = used[kind]
            batches[call].append(tuple(t[i : i + 1] for t in drawn[kind]))
            used[kind] = i + 1
    return [tuple(torch.cat(parts) for parts in zip(*b, strict=True)) for b in batches]


def row_generators(
    caller: Caller, layout: str, context: BatchContext | None, seeds: Tensor
) -> list[torch.Generator | None] | None:
    """Per-row generators: audited rows seeded from ``seeds``, the others as the context says
    (a seeded companion at ``position``: ``chunk_seed(seeds[0], 0, position, ...)``)."""
    if not caller.seeds:
        return None
    out: list[torch.Generator | None] = []
    audited = iter(seeds.tolist())
    for position, kind in enumerate(layout):
        if kind == "A":
            out.append(torch.Generator().manual_seed(next(audited)))
        elif context is not None and context.seeded_companions:
            companion = chunk_seed(int(seeds[0]), 0, position, "invariance-companion")
            out.append(torch.Generator().manual_seed(companion))
        else:
            out.append(None)
    return out
