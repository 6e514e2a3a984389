r"""Batch invariance: a row's law must not depend on the rest of its batch.

A row of a batched verifier or step is one request. Whatever else its batch holds (other rows
seeded or unseeded, greedy or sampled, rows of another scenario, more or fewer rows) and
wherever the row sits, its law must be the one it has alone, and a seeded row's output for its
seed must be the one it has alone. ``check_invariance`` runs each scenario's rows **alone** (a
batch of one row, one call per row) and inside the mixed batches of ``contexts`` (each a layout
of the batch: ``A`` the audited rows, ``G`` greedy rows (one-hot, temperature 0), ``F`` sampled
rows of another toy pair with the same ``k`` and ``V``, ``O`` (steps) rows with another prefix),
and decides twice:

**Exactly, where a row's randomness can be paired.** The same row, with the same random values,
alone and in the batch, must give the same block. A function that takes per-row generators
(a keyword parameter ``generators``: one ``torch.Generator`` or ``None`` per row, ``None`` for
an unseeded row) is paired by its seed; any other is paired by the capture of its random ops
(``specdec.supply.Supply``, one row of values per batch row, each random op's leading dimension
the batch). ``PROBES`` draft blocks and value vectors per scenario and context are tried; each
call is made twice, so a nondeterministic function is not mistaken for a dependent one. A
different block is a certain dependence (``exact = "differs"``, with the row, its values and
both blocks as evidence: false-fail rate 0) of the row's *output* on its batch, given its own
random values; the capture's convention is that a row's values are those at its index of each
random op, so an engine that permutes its rows before drawing is reported dependent by it (its
output for the same values does change with the batch, though its law may not). Agreement at
every probe is evidence, not a proof (``"same at N probes"``); randomness the capture cannot
pair is ``"cannot decide"``, and the statistical test decides alone.

**Statistically, everywhere.** The row's completed blocks (``run.complete_verifier`` /
``complete_step``: the criterion's completion law) are counted over the scenario's cells, ``n``
alone and ``n`` in the context, and compared by the two-sample L1 test bounded through its mean
(``specdec.testing.stats.two_sample_mean``: McDiarmid's inequality about
:math:`\mathbb E D \le \sqrt{2(m-1)/n}`; under the null hypothesis that the row's law is the
same in both and the rows of a batch are independent, false-fail rate at most the test's level
whatever the law and ``n``). It needs 1.8 to 7.4 times fewer rows than the union bound of
``two_sample`` for the same power (the default batteries: 6 to 264 cells), and each row alone
is one call of the function: the check's cost. Holm's procedure across every (scenario,
context) test holds the family-wise false-fail rate at ``false_fail_rate``, an error budget of
its own beside the one of the audit's other tests (the audit as a whole: at most twice it).
``n`` is ``samples`` when given, else the smallest size whose cells let each test, at Holm's
first level, detect

.. math:: \mathrm{TV}(\text{law alone}, \text{law in the batch}) \ge \delta

with false-pass rate ``false_pass_rate`` (``delta`` = ``detect_tv`` when given, else
``INVARIANCE_TV``; ``plan.smallest_sufficient``'s iteration over the cells), that is

.. math:: n = \Big\lceil \big(\sqrt{2(m-1)} + 2\sqrt{\ln(1/a)} + 2\sqrt{\ln(1/\beta)}\big)^2
    / (4\delta^2) \Big\rceil

at Holm's first level ``a``; each test reports the distance it detects.

A context is batch-dependent when its exact comparison differs or Holm rejects its test; the
audit's verdict is then ``"batch-dependent"`` (``report.VERDICT_EXIT``), whatever the
homogeneous battery said, and the report names the context, the distance, the p-value and the
exact evidence. A row whose law is right alone and wrong in a batch is never ``lossless``.

What each form can be given: a batched verifier or a ``VerifyRule`` every layout; a batched
step takes one temperature per call, so no greedy rows beside sampled ones (``O`` rows instead:
other sequences of the same length). A function without ``generators`` is never handed seeded
rows (the report says so).
"""

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from specdec._checks import check_emitted_blocks
from specdec.models.toy import make_toy_pair
from specdec.supply import NotEnumerableError, Supply
from specdec.testing.audit.blame import blamed
from specdec.testing.audit.invariance_results import ContextResult, InvarianceResult
from specdec.testing.audit.options import AuditOptions, Progress
from specdec.testing.audit.plan import (
    ScenarioPlan,
    plan_step_scenario,
    plan_verifier_scenario,
    smallest_sufficient,
)
from specdec.testing.audit.run import (
    SLICE_ENTRIES,
    InvalidOutputError,
    complete_step,
    complete_verifier,
)
from specdec.testing.audit.scenario import Scenario, scenario_logits
from specdec.testing.audit.subject import Subject
from specdec.testing.simulate import draft_batch
from specdec.testing.stats import (
    encode_sequences,
    holm,
    l1_two_sample_mean_p_value,
    l1_two_sample_mean_threshold,
    min_detectable_tv_two_sample_mean,
    min_sample_size_two_sample_mean,
)

__all__ = [
    "INVARIANCE_TV",
    "PROBES",
    "STEP_CONTEXTS",
    "VERIFIER_CONTEXTS",
    "BatchContext",
    "ContextResult",
    "InvarianceResult",
    "check_invariance",
    "takes_generators",
]

INVARIANCE_TV = 0.1
"""The TV between a row's law alone and in a batch each test detects by default."""

PROBES = 8
"""Paired batches per scenario and context (the exact comparison): each audited row of each is
also run alone with the same random values or seed."""


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


class _Caller:
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


def _batches(
    caller: _Caller, scenario: Scenario, layout: str, calls: int, data: torch.Generator
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


def _generators(
    caller: _Caller, layout: str, context: BatchContext | None, seeds: Tensor
) -> list[torch.Generator | None] | None:
    """Per-row generators: audited rows seeded from ``seeds``, the others as the context says."""
    if not caller.seeds:
        return None
    out: list[torch.Generator | None] = []
    audited = iter(seeds.tolist())
    for position, kind in enumerate(layout):
        if kind == "A":
            out.append(torch.Generator().manual_seed(next(audited)))
        elif context is not None and context.seeded_companions:
            out.append(torch.Generator().manual_seed(7_919 * (position + 1) + int(seeds[0])))
        else:
            out.append(None)
    return out


def _sample(
    caller: _Caller,
    plan: ScenarioPlan,
    context: BatchContext | None,
    n: int,
    seed: int,
) -> Tensor:
    """Cell counts of ``n`` audited rows' completed blocks, alone (``context=None``) or in it."""
    scenario = plan.scenario
    layout = "A" if context is None else context.layout
    audited = layout.count("A")
    calls = -(-n // audited)
    data = torch.Generator().manual_seed(seed)
    noise = torch.Generator().manual_seed(seed + 1)
    blocks = []
    most = max(1, SLICE_ENTRIES // (len(layout) * (scenario.k + 1) * plan.vocab))
    positions = [i for i, kind in enumerate(layout) if kind == "A"]
    for start in range(0, calls, most):
        chunk = min(most, calls - start)
        for rows in _batches(caller, scenario, layout, chunk, data):
            seeds = torch.randint(0, 2**62, (audited,), generator=data)
            chosen = _generators(caller, layout, context, seeds)
            blocks.append(caller.call(scenario, rows, noise, chosen, checked=False))
    whole = torch.cat(blocks).long()  # every row's values checked once, companions' too
    check_emitted_blocks(whole, whole.shape[0], scenario.k, plan.vocab, InvalidOutputError)
    every = whole.view(-1, len(layout), scenario.k + 1)[:, positions].reshape(-1, scenario.k + 1)
    every = every[:n]
    complete = complete_step if caller.step else complete_verifier
    completed = complete(plan, every, data)
    cells = plan.mapping[encode_sequences(completed, plan.vocab)]
    return torch.bincount(cells, minlength=int(plan.pooled.numel()))


def _values(generator: torch.Generator, shape: tuple[int, ...]) -> Tensor:
    """Float64 values on the ``2^-53`` grid."""
    return torch.randint(0, 2**53, shape, generator=generator, dtype=torch.int64).double() / 2**53


def _paired(
    caller: _Caller, scenario: Scenario, context: BatchContext, probes: int, seed: int
) -> tuple[str, str]:
    """The exact comparison: ``(status, evidence)`` (module docstring). Every audited row of
    ``probes`` batches is run alone with the same random values (or seed) as in its batch."""
    if probes == 0:
        return "not run", ""
    data = torch.Generator().manual_seed(seed)
    batches = _batches(caller, scenario, context.layout, probes, data)
    try:
        for probe, rows in enumerate(batches):
            found = (
                _by_seed(caller, scenario, context, rows, probe)
                if caller.seeds
                else _by_capture(caller, scenario, context.layout, rows, probe, data)
            )
            if found[0] != "same":
                return found
    except NotEnumerableError as error:
        return f"cannot decide: {error}", ""
    return f"same at {probes} probes", ""


def _show(block: Tensor) -> str:
    return str(block[block >= 0].tolist())


def _twice(call: Callable[[], Tensor]) -> Tensor | None:
    """``call``'s blocks, or ``None`` when a second call gives others (nondeterministic)."""
    first, second = call(), call()
    return first if torch.equal(first, second) else None


def _compare(
    alone: Tensor, batched: Tensor | None, row: int, rows: Rows, how: str
) -> tuple[str, str]:
    if batched is None:
        return "cannot decide: the same batch and random values gave different blocks", ""
    if torch.equal(alone, batched):
        return "same", ""
    return "differs", (
        f"row {row} of the batch, input {rows[0][row].tolist()}, {how}: alone "
        f"{_show(alone)}, in the batch {_show(batched)}"
    )


def _by_seed(
    caller: _Caller, scenario: Scenario, context: BatchContext, rows: Rows, probe: int
) -> tuple[str, str]:
    layout = context.layout
    positions = [i for i, kind in enumerate(layout) if kind == "A"]
    seeds = torch.arange(len(positions)) + 1_000 * (probe + 1)
    shared = torch.Generator().manual_seed(probe)
    state = shared.get_state()

    def batch() -> Tensor:
        shared.set_state(state)
        return caller.call(scenario, rows, shared, _generators(caller, layout, context, seeds))

    in_batch = _twice(batch)
    for number, row in enumerate(positions):
        lone = tuple(t[row : row + 1] for t in rows)
        one_seed = seeds[number : number + 1]

        def alone(lone: Rows = lone, one_seed: Tensor = one_seed) -> Tensor:
            generator = torch.Generator().manual_seed(probe + 1)
            return caller.call(scenario, lone, generator, _generators(caller, "A", None, one_seed))

        lone_out = alone()
        if number == 0 and not torch.equal(lone_out, alone()):
            return "cannot decide: the same seed gave different blocks alone", ""
        found = _compare(
            lone_out[0],
            None if in_batch is None else in_batch[row],
            row,
            rows,
            f"seed {int(one_seed)}",
        )
        if found[0] != "same":
            return found
    return "same", ""


def _by_capture(
    caller: _Caller, scenario: Scenario, layout: str, rows: Rows, probe: int, data: torch.Generator
) -> tuple[str, str]:
    lone_rows = [tuple(t[row : row + 1] for t in rows) for row in range(len(layout))]
    recording = Supply(None)
    with recording:
        caller.call(scenario, lone_rows[layout.index("A")], torch.Generator().manual_seed(0), None)
    per_row = recording.used
    if per_row == 0:
        raise NotEnumerableError("the function drew no random value the capture feeds")
    values = _values(data, (len(layout), per_row))

    def fed(given: Rows, chosen: Tensor) -> Tensor:
        supply = Supply(chosen, chosen.shape[0])
        with supply:
            out = caller.call(scenario, given, torch.Generator().manual_seed(probe), None)
        if supply.used != per_row:
            raise NotEnumerableError(
                f"the function drew {supply.used} random values per row in a batch of "
                f"{chosen.shape[0]}, not the {per_row} it drew alone"
            )
        return out

    in_batch = _twice(lambda: fed(rows, values))
    for row, kind in enumerate(layout):
        if kind != "A":
            continue
        alone = fed(lone_rows[row], values[row : row + 1])
        if row == layout.index("A") and not torch.equal(
            alone, fed(lone_rows[row], values[row : row + 1])
        ):
            return "cannot decide: the same random values gave different blocks alone", ""
        shown = ", ".join(f"{v:.4f}" for v in values[row].tolist()[:6])
        found = _compare(
            alone[0],
            None if in_batch is None else in_batch[row],
            row,
            rows,
            f"its random values [{shown}{', ...' if per_row > 6 else ''}]",
        )
        if found[0] != "same":
            return found
    return "same", ""


def _sized(
    caller: _Caller, scenario: Scenario, options: AuditOptions, level: float
) -> tuple[int, ScenarioPlan]:
    plan_scenario = plan_step_scenario if caller.step else plan_verifier_scenario
    if options.samples is not None:
        return options.samples, plan_scenario(scenario, options.samples)
    tv = options.detect_tv or INVARIANCE_TV
    return smallest_sufficient(
        plan_scenario,
        scenario,
        lambda cells: min_sample_size_two_sample_mean(cells, tv, level, options.false_pass_rate),
    )


def check_invariance(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[Scenario],
    progress: Progress | None = None,
    *,
    contexts: Sequence[BatchContext] | None = None,
    probes: int = PROBES,
) -> InvarianceResult:
    """Each scenario's rows alone and in each batch context, compared (module docstring).

    Args:
        subject: a batched verifier, a ``VerifyRule`` or a batched step.
        options: ``samples`` or ``detect_tv`` (default ``INVARIANCE_TV``) size each test;
            ``false_fail_rate`` (family-wise, Holm) and ``false_pass_rate``; ``seed``;
            ``dtype`` (a verifier's rows).
        scenarios: the scenarios whose rows are audited.
        progress: called with one line per scenario.
        contexts: the batches (default ``VERIFIER_CONTEXTS`` or ``STEP_CONTEXTS``, and
            ``SEEDED_CONTEXTS`` for a function taking ``generators``).
        probes: paired batches per scenario and context (0: no exact comparison).

    Raises:
        ValueError: a single-sequence subject, a layout with no audited row, no scenario.
    """
    start = time.perf_counter()
    if not subject.batched or subject.level not in ("verifier", "step"):
        raise ValueError(
            "invariance=True runs rows in batches: it needs a batched verifier, a VerifyRule "
            f"or a batched step (@batched or batched=True), not a {subject.form}."
        )
    if not scenarios:
        raise ValueError("the invariance check needs at least one scenario, got none.")
    caller = _Caller(subject, options)
    chosen = list(contexts) if contexts is not None else (
        list(STEP_CONTEXTS) if caller.step else list(VERIFIER_CONTEXTS)
    )  # fmt: skip
    if contexts is None and caller.seeds:
        chosen += SEEDED_CONTEXTS
    if any("A" not in c.layout for c in chosen):
        raise ValueError("every context's layout needs an audited row (A).")
    tests = len(scenarios) * len(chosen)
    level = options.false_fail_rate / tests  # Holm's first level
    raw: list[ContextResult] = []
    for index, scenario in enumerate(scenarios):
        n, plan = _sized(caller, scenario, options, level)
        base = 1_000_003 * options.seed + 7_001 * index
        alone = _sample(caller, plan, None, n, base)
        cells = int(plan.pooled.numel())
        for number, context in enumerate(chosen):
            counts = _sample(caller, plan, context, n, base + 2 * number + 2)
            distance = float(((counts - alone).abs().sum()).item()) / n
            exact, evidence = _paired(caller, scenario, context, probes, base + 2 * number + 3)
            raw.append(
                ContextResult(
                    scenario=scenario.name,
                    context=context.name,
                    description=context.description,
                    samples=n,
                    num_cells=cells,
                    l1_distance=distance,
                    l1_threshold=l1_two_sample_mean_threshold(cells, n, level),
                    p_value=l1_two_sample_mean_p_value(distance, cells, n),
                    detectable_tv=min_detectable_tv_two_sample_mean(
                        cells, n, level, options.false_pass_rate
                    ),
                    exact=exact,
                    evidence=evidence,
                )
            )
        if progress is not None:
            mine = raw[-len(chosen) :]
            found = [c.context for c in mine if c.exact == "differs" or c.p_value <= level]
            progress(
                f"[invariance {index + 1}/{len(scenarios)}] {scenario.name}: n={n} alone and "
                f"in {len(chosen)} batch(es)"
                + (f"; differs in {', '.join(found)}" if found else "")
            )
    rejected = holm([c.p_value for c in raw], options.false_fail_rate)
    decided = tuple(
        ContextResult(**{**asdict(c), "dependent": c.exact == "differs" or hit})
        for c, hit in zip(raw, rejected, strict=True)
    )
    notes = []
    if not caller.seeds:
        notes.append(
            "no seeded rows: the function takes no per-row generators (a 'generators' "
            "parameter), so seeded and unseeded rows were not mixed"
        )
    if caller.step:
        notes.append("no greedy rows beside sampled ones: a step takes one temperature per call")
    return InvarianceResult(
        contexts=decided,
        paired_by="per-row seeds" if caller.seeds else "captured random values",
        false_fail_rate=options.false_fail_rate,
        false_pass_rate=options.false_pass_rate,
        notes=tuple(notes),
        seconds=time.perf_counter() - start,
    )
