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

The batches and the calls that run them are ``specdec.testing.audit.judging.invariance_batches``;
the exact comparison is ``specdec.testing.audit.judging.invariance_paired``.

What each form can be given: a batched verifier or a ``VerifyRule`` every layout; a batched
step takes one temperature per call, so no greedy rows beside sampled ones (``O`` rows instead:
other sequences of the same length). A function without ``generators`` is never handed seeded
rows (the report says so).
"""

import time
from collections.abc import Sequence
from dataclasses import asdict

import torch
from torch import Tensor

from specdec._checks import check_emitted_blocks
from specdec.testing.audit.contract.drawer import seeded
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.invariance_batches import (
    SEEDED_CONTEXTS,
    STEP_CONTEXTS,
    VERIFIER_CONTEXTS,
    BatchContext,
    Caller,
    layout_batches,
    row_generators,
    takes_generators,
)
from specdec.testing.audit.judging.invariance_paired import paired_comparison
from specdec.testing.audit.reporting.invariance_results import ContextResult, InvarianceResult
from specdec.testing.audit.running.plan import (
    ScenarioPlan,
    plan_step_scenario,
    plan_verifier_scenario,
    smallest_sufficient,
)
from specdec.testing.audit.running.run import (
    SLICE_ENTRIES,
    InvalidOutputError,
    complete_step,
    complete_verifier,
)
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
    "SEEDED_CONTEXTS",
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


def _sample(
    caller: Caller,
    plan: ScenarioPlan,
    context: BatchContext | None,
    n: int,
    where: tuple[int, int, int],
) -> Tensor:
    """Cell counts of ``n`` audited rows' completed blocks, alone (``context=None``) or in it;
    ``where`` is ``(audit seed, scenario index, chunk)`` of the one seed rule (``seeded``)."""
    scenario = plan.scenario
    layout = "A" if context is None else context.layout
    audited = layout.count("A")
    calls = -(-n // audited)
    data = seeded(*where, "invariance-data")
    noise = seeded(*where, "invariance-noise")
    blocks = []
    most = max(1, SLICE_ENTRIES // (len(layout) * (scenario.k + 1) * plan.vocab))
    positions = [i for i, kind in enumerate(layout) if kind == "A"]
    for start in range(0, calls, most):
        chunk = min(most, calls - start)
        for rows in layout_batches(caller, scenario, layout, chunk, data):
            seeds = torch.randint(0, 2**62, (audited,), generator=data)
            chosen = row_generators(caller, layout, context, seeds)
            blocks.append(caller.call(scenario, rows, noise, chosen, checked=False))
    whole = torch.cat(blocks).long()  # every row's values checked once, companions' too
    check_emitted_blocks(whole, whole.shape[0], scenario.k, plan.vocab, InvalidOutputError)
    every = whole.view(-1, len(layout), scenario.k + 1)[:, positions].reshape(-1, scenario.k + 1)
    every = every[:n]
    complete = complete_step if caller.step else complete_verifier
    completed = complete(plan, every, data)
    cells = plan.mapping[encode_sequences(completed, plan.vocab)]
    return torch.bincount(cells, minlength=int(plan.pooled.numel()))


def _sized(
    caller: Caller, scenario: Scenario, options: AuditOptions, level: float
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
    caller = Caller(subject, options)
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
        alone = _sample(caller, plan, None, n, (options.seed, index, 0))
        cells = int(plan.pooled.numel())
        for number, context in enumerate(chosen):  # context ``number`` is chunk ``number + 1``
            counts = _sample(caller, plan, context, n, (options.seed, index, number + 1))
            distance = float(((counts - alone).abs().sum()).item()) / n
            exact, evidence = paired_comparison(
                caller,
                scenario,
                context,
                probes,
                seeded(options.seed, index, number + 1, "invariance-pairs"),
            )
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
