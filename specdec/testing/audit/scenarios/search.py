"""Coverage-guided search: pairs that reach the branches of the audited code a battery missed.

A verifier's bug can live in a branch that no default scenario reaches: ``if mass < 1e-3:``
(a residual mass taken as zero), ``if ratio > 1 - 1e-3:`` (a ratio taken as one), ``if
q < 1e-3:`` (a draft probability taken as underflow). The battery's rows have residual masses,
ratios and probabilities of a few hundredths at the smallest, so such a verifier is lossless on
every scenario of it. This module runs the audited function on each scenario under
``specdec.testing.audit.scenarios.coverage`` (a *probe*: every draft block the draft can propose,
capped, each at the uniforms' two extremes and at two seeded random draws), then tries candidate
pairs built to reach small thresholds and keeps those that reach a branch arc or a line nothing
before reached. The kept scenarios join the battery, and the audit (exact or statistical) runs
on all of them.

The candidates (``coverage_candidates``), each a seeded context-dependent pair (order 1,
``V`` 2-4, ``k`` 1-3, dyadic rows so float64 holds them exactly), whose rows are, context by
context, mostly of the candidate's kind and otherwise of another:

=================  =====================================================================
kind               rows
=================  =====================================================================
``tiny-residual``  the draft is the target with a mass ``eps`` moved between two tokens:
                   residual mass ``eps`` (onto a token the target forbids, when one is)
``near-one``       the same onto a token of target probability >= 1/4: ratios ``1 - O(eps)``
``tiny-draft``     a draft probability ``eps`` (on a token the target forbids, when one is)
``tiny-target``    a target probability ``eps``
``zeros``          independent rows with zero probabilities on either side
``one-hot``        one-hot target or draft rows
``equal``          the draft equals the target
``tie``            a target whose two largest probabilities tie
=================  =====================================================================

``eps`` runs from the largest scale down (``SCALES``: ``2^-7`` to ``2^-17``), so the first
candidate to reach a branch guarded by a threshold is the one nearest the threshold: the
largest perturbation that still takes it, which is where a bug in it shows most.

Thresholds in vectorised code. A branch inside torch ops (``q.clamp_min(1e-4)``,
``torch.where(mass < 1e-3, ...)``, ``q + 1e-6``) is no arc. The probes also log, per scenario,
the constants the function's torch ops compared, clamped or selected on and the sides of each
its values fell on (``specdec.testing.thresholds``); after the arc search, the *threshold
search* tries pairs derived from each small constant not yet straddled
(``small_mass.threshold_candidates``: drafted ``q``, ``p``, ratio gaps and residual masses
wholly below it and wholly above it) and keeps each that puts a value on a side of a constant
nothing before had (at most ``THRESHOLD_KEEP``). The report names the thresholds straddled.

What it does not do: it searches the rows of a verifier's inputs, not sampling options
(a verifier takes none) nor dtypes; a budget spent without reaching an arc or a threshold's
other side leaves it listed as never reached, which is the report's statement, not a proof
that it is unreachable.
"""

import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import torch
from torch import Tensor

from specdec.models.toy import ToyModel, ToyPair
from specdec.noise import uniforms as draw_uniforms
from specdec.testing.audit.contract.drawer import chunk_seed
from specdec.testing.audit.contract.scenario import Scenario, acceptance_mass
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.scenarios.coverage import ArcRecorder, CodeCoverage
from specdec.testing.audit.scenarios.small_mass import threshold_search
from specdec.testing.thresholds import ThresholdRecorder
from specdec.types import VerifyRule

__all__ = [
    "KINDS",
    "PROBE",
    "SCALES",
    "TRIES_PER_SEARCH",
    "WITNESSES",
    "CoverageSearch",
    "coverage_candidates",
    "coverage_search",
    "measurable",
    "tries_for",
]

KINDS = (
    "tiny-residual",
    "near-one",
    "tiny-draft",
    "tiny-target",
    "zeros",
    "one-hot",
    "equal",
    "tie",
)
"""The kinds of candidate rows (module docstring)."""

SCALES = (2.0**-7, 2.0**-10, 2.0**-13, 2.0**-17)
"""The small masses, probabilities and ratio gaps the candidates use, the largest first."""

TRIES_PER_SEARCH = 8
"""Candidates tried per unit of ``search`` (the search's budget knob): 128 at the default 16, for
a rule or a batched verifier (one call per candidate); a single-sequence verifier, called once
per block, tries ``search`` candidates (``tries_for``)."""

WITNESSES = 3
"""Scenarios the search gives each branch arc and line before it stops looking for more."""

PROBE = (
    "a probe: each scenario run once on every draft block the draft can propose (at most "
    "{blocks}; {single} for a single-sequence verifier), at uniforms all 0, all 1 - 2^-53 and "
    "two seeded random draws (a verifier drawing its own randomness: each block four times, "
    "twice for a single-sequence one)"
)
"""How a scenario is run for the measurement (the report's ``probe``)."""

_BLOCKS = 64
_SINGLE_BLOCKS = 8
_DENOMINATOR = 2**20
_OWN_KIND = 0.6


def tries_for(subject: Subject, search: int) -> int:
    """The candidates the search tries for ``subject`` at budget ``search`` (``TRIES_PER_SEARCH``
    per unit for a rule or a batched verifier, one per unit for a single-sequence one).

    Example:
        >>> import specdec
        >>> from specdec.testing import zoo
        >>> from specdec.testing.audit.contract.subject import as_subject
        >>> tries_for(as_subject(specdec.verify_tokens), 16)
        128
        >>> tries_for(as_subject(zoo.reference_verifier_single), 16)
        16
    """
    batched = subject.form == "rule" or subject.batched
    return (TRIES_PER_SEARCH if batched else 1) * search


def measurable(subject: Subject, given: Sequence[str]) -> bool:
    """Whether the audit measures coverage for ``subject`` with the options ``given``: a
    verifier (rule, batched or single) handed float64 rows on the CPU without reserved ids
    or ragged blocks (the probe hands it nothing else)."""
    engine = {"dtype", "device", "reserved_ids", "ragged"}
    return subject.level == "verifier" and not engine & set(given)


def _blocks(scenario: Scenario, rng: random.Random, limit: int) -> list[tuple[int, ...]]:
    """Draft blocks the draft can propose after the prefix (positive probability at every
    position), all of them when at most ``limit``, else a seeded sample of ``limit``."""
    draft, vocab = scenario.pair.draft, scenario.pair.draft.vocab_size
    if vocab**scenario.k > 4096:  # too many to list: drawn from the draft instead
        drawn = set()
        for _ in range(4 * limit):
            block: list[int] = []
            for _ in range(scenario.k):
                row = draft.float_probs(torch.tensor([[*scenario.prefix, *block]]))[0]
                block.append(rng.choices(range(vocab), weights=row.tolist())[0])
            drawn.add(tuple(block))
        return sorted(drawn)[:limit]
    possible: list[tuple[int, ...]] = [()]
    for _ in range(scenario.k):  # extend every block by the tokens the draft can propose
        rows = draft.float_probs(torch.tensor([[*scenario.prefix, *b] for b in possible]))
        possible = [(*b, t) for b, row in zip(possible, rows.tolist(), strict=True)
                    for t in range(vocab) if row[t] > 0]  # fmt: skip
    return possible if len(possible) <= limit else sorted(rng.sample(possible, limit))


def _rows(scenario: Scenario, blocks: Sequence[tuple[int, ...]]) -> tuple[Tensor, Tensor, Tensor]:
    """The verifier's inputs for ``blocks``: tokens ``[N, k]``, draft ``[N, k, V]`` and target
    ``[N, k+1, V]`` rows, float64."""
    k, pair = scenario.k, scenario.pair
    tokens = torch.tensor(blocks, dtype=torch.int64).reshape(len(blocks), k)
    contexts = [[(*scenario.prefix, *b[:j]) for j in range(k + 1)] for b in blocks]
    target = torch.stack(
        [pair.target.float_probs(torch.tensor([c[j] for c in contexts])) for j in range(k + 1)], 1
    )
    draft = target[:, :0] if k == 0 else torch.stack(
        [pair.draft.float_probs(torch.tensor([c[j] for c in contexts])) for j in range(k)], 1
    )  # fmt: skip
    return tokens, draft, target


@dataclass(frozen=True)
class CoverageSearch:
    """The scenarios the search kept and the coverage of the battery with them.

    Attributes:
        found: the searched scenarios kept (each reached a branch arc or line nothing before
            had), in the order found.
        coverage: what the battery and ``found`` ran of the function's own code.
    """

    found: tuple[Scenario, ...]
    coverage: CodeCoverage


def _probe(
    subject: Subject,
    recorder: ArcRecorder,
    scenario: Scenario,
    seed: int,
    number: int,
    values: ThresholdRecorder | None = None,
) -> None:
    """Run ``subject`` on ``scenario``'s probe (``PROBE``) with arcs recorded (and the
    thresholds of its torch ops, given ``values``), seeded by the one seed rule for scenario
    ``number`` of the search (the battery's, then the candidates'); what the function raises
    is left to the audit (it runs every kept scenario itself)."""
    rng = random.Random(chunk_seed(seed, number, 0, "coverage-probe"))
    single = subject.form != "rule" and not subject.batched  # one call per block: fewer
    blocks = _blocks(scenario, rng, _SINGLE_BLOCKS if single else _BLOCKS)
    if not blocks:
        return
    tokens, draft, target = _rows(scenario, blocks)
    generator = torch.Generator().manual_seed(rng.randrange(2**62))
    size, k = len(blocks), scenario.k
    extremes = torch.tensor([0.0, 1.0 - 2.0**-53], dtype=torch.float64)
    noise = torch.cat(
        [
            extremes.repeat_interleave(size * (k + 1)).reshape(2 * size, k + 1),
            draw_uniforms(generator, (2 * size, k + 1)),
        ]
    )  # [4N, k+1]: all 0, all 1 - 2^-53, two random draws
    fn = recorder.traced(subject.fn if values is None else values.traced(subject.fn))
    repeat = (tokens.repeat(4, 1), draft.repeat(4, 1, 1), target.repeat(4, 1, 1))
    try:
        if subject.form == "rule":
            cast(VerifyRule, fn)(*repeat, noise)
        elif subject.batched:
            fn(*repeat, generator)
        else:
            for row in range(size):  # two calls per block, on one generator
                for _ in range(2):
                    fn(tokens[row], draft[row], target[row], generator)
    except Exception:  # the audit runs the scenario itself and reports what it raises
        return


def _keys(recorder: ArcRecorder) -> frozenset[Any]:
    """The branch arcs and lines the current scenario reached."""
    universe = recorder.universe()
    keys: set[Any] = set()
    for code, (source, line) in recorder.scenario_arcs():
        if (source, line) in universe.get(code, ()):
            keys.add((code, source, line))
        if line > 0:
            keys.add((code, line))
    return frozenset(keys)


def coverage_search(
    subject: Subject,
    battery: Sequence[Scenario],
    *,
    tries: int,
    keep: int,
    seed: int = 0,
) -> CoverageSearch:
    """Measure ``battery``'s coverage of ``subject``'s code, then search (module docstring).

    A candidate is kept when it reaches a branch arc or a line that fewer than ``WITNESSES``
    scenarios reached before it: a branch reached once may be reached where its effect is
    masked (a guard computed for a draft position the block never gets to), so each is given
    up to ``WITNESSES`` scenarios that reach it.

    Args:
        subject: a verifier (``measurable``).
        battery: the scenarios the audit runs anyway.
        tries: candidates to try at most (0: measure only); the search stops early once every
            branch arc has ``WITNESSES`` scenarios. The threshold search then tries at most as
            many pairs derived from the thresholds logged (``small_mass``).
        keep: candidates to keep at most (the threshold search keeps ``THRESHOLD_KEEP`` more
            at most).
        seed: the candidates' and the probes' seed.

    Returns:
        The kept scenarios and the coverage of ``battery`` with them.
    """
    start = time.perf_counter()
    recorder = ArcRecorder.for_function(subject.fn)
    values = ThresholdRecorder()
    per_scenario: list[tuple[str, int]] = []
    witnesses: Counter[Any] = Counter()

    def run(scenario: Scenario, number: int) -> frozenset[Any]:
        recorder.start_scenario()
        values.start_scenario()
        _probe(subject, recorder, scenario, seed, number, values)
        keys = _keys(recorder)
        per_scenario.append((scenario.name, sum(1 for key in keys if len(key) == 3)))
        return keys

    for number, scenario in enumerate(battery):
        witnesses.update(run(scenario, number))
    found: list[Scenario] = []
    tried = 0
    for candidate in coverage_candidates(tries, seed=seed):
        branches = [(c, *arc) for c, arcs in recorder.universe().items() for arc in arcs]
        if len(found) >= keep or all(witnesses[b] >= WITNESSES for b in branches):
            break
        tried += 1
        keys = run(candidate, len(battery) + tried - 1)
        if any(witnesses[key] < WITNESSES for key in keys):
            found.append(candidate)
            witnesses.update(keys)
        else:
            per_scenario.pop()  # not kept: not audited, not counted
    first = len(battery) + tried  # the threshold pairs' scenario numbers follow
    derived, threshold_tried = threshold_search(run, values, per_scenario, tries, first)
    found += derived
    coverage = recorder.summary(
        tuple(per_scenario),
        searched=tried,
        found=tuple(s.name for s in found),
        probe=PROBE.format(blocks=_BLOCKS, single=_SINGLE_BLOCKS),
        seconds=time.perf_counter() - start,
        thresholds=values.thresholds(),
        threshold_searched=threshold_tried,
        threshold_found=tuple(s.name for s in derived),
    )
    return CoverageSearch(tuple(found), coverage)


def _composition(rng: random.Random, vocab: int, zeros: bool) -> list[int]:
    """A random row of ``vocab`` integers summing to ``_DENOMINATOR`` (some 0 if ``zeros``)."""
    support = [t for t in range(vocab) if not zeros or rng.random() > 0.4] or [rng.randrange(vocab)]
    cuts = sorted(rng.randrange(1, _DENOMINATOR) for _ in range(len(support) - 1))
    row = [0] * vocab
    for token, low, high in zip(support, [0, *cuts], [*cuts, _DENOMINATOR], strict=True):
        row[token] = high - low
    return row


def _moved(row: list[int], source: int, to: int, amount: int) -> list[int]:
    out = list(row)
    out[source] -= amount
    out[to] += amount
    return out


def _pair_rows(kind: str, vocab: int, eps: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """One context's target and draft rows (integers over ``_DENOMINATOR``) of ``kind``."""
    target = _composition(rng, vocab, zeros=kind in ("tiny-residual", "tiny-draft", "zeros"))
    largest = max(range(vocab), key=lambda t: target[t])
    others = [t for t in range(vocab) if t != largest]
    forbidden = [t for t in others if target[t] == 0]
    if kind == "tiny-residual":
        return target, _moved(target, largest, rng.choice(forbidden or others), eps)
    if kind == "near-one":  # q(x) = p(x) + eps at the likeliest token, the rest unrelated
        rest = _composition(rng, vocab - 1, zeros=True)
        if target[largest] + eps > _DENOMINATOR:  # a one-hot target: no room above it
            return target, _moved(target, largest, rng.choice(others), eps)
        free = _DENOMINATOR - target[largest] - eps
        draft = [v * free // _DENOMINATOR for v in rest]
        draft[rng.randrange(vocab - 1)] += free - sum(draft)
        draft.insert(largest, target[largest] + eps)
        return target, draft
    if kind == "tiny-draft":
        token = rng.choice(forbidden or others)
        draft = _moved(target, token, largest, target[token])  # the token emptied...
        return target, _moved(draft, largest, token, min(eps, draft[largest]))  # ...then eps
    if kind == "tiny-target":
        token = rng.choice(others)
        target = _moved(target, token, largest, target[token])
        target = _moved(target, largest, token, min(eps, target[largest]))
        return target, _composition(rng, vocab, zeros=False)
    if kind == "one-hot":
        hot = [0] * vocab
        hot[rng.randrange(vocab)] = _DENOMINATOR
        other = _composition(rng, vocab, zeros=False)
        return (hot, other) if rng.random() < 0.5 else (other, hot)
    if kind == "equal":
        return target, target
    if kind == "tie":  # two tokens share the largest probability
        top = _DENOMINATOR // 2 if vocab == 2 else 3 * _DENOMINATOR // 8
        rest = [(_DENOMINATOR - 2 * top) // (vocab - 2)] * (vocab - 2) if vocab > 2 else []
        tied = [top, top, *rest]
        tied[-1] += _DENOMINATOR - sum(tied)  # the rest's remainder: still below the top
        rng.shuffle(tied)
        return tied, _composition(rng, vocab, zeros=False)
    return target, _composition(rng, vocab, zeros=True)  # zeros


def _model(vocab: int, rows: Sequence[list[int]]) -> ToyModel:
    exact = [tuple(Fraction(v, _DENOMINATOR) for v in row) for row in rows]
    return ToyModel.from_rows(vocab, 1, exact)


def coverage_candidates(count: int, *, seed: int = 0) -> Iterator[Scenario]:
    """``count`` seeded candidate scenarios (module docstring; candidate ``index`` drawn from
    ``chunk_seed(seed, index, 0, ...)``, the one seed rule), the kinds in turn, each scale of
    ``SCALES`` in turn from the largest; those that cannot accept a draft are skipped (a
    scenario must exercise acceptance).

    Example:
        >>> [s.name for s in coverage_candidates(3)]  # doctest: +NORMALIZE_WHITESPACE
        ['coverage-0-tiny-residual-v2-k1', 'coverage-1-near-one-v3-k1',
         'coverage-2-tiny-draft-v4-k1']
    """
    for index in range(count):
        rng = random.Random(chunk_seed(seed, index, 0, "coverage-candidate"))
        kind = KINDS[index % len(KINDS)]
        scale = SCALES[(index // len(KINDS)) % len(SCALES)]
        vocab, k = 2 + index % 3, 1 + (index // 3) % 3
        eps = round(scale * _DENOMINATOR)
        target_rows, draft_rows = [], []
        for _ in range(vocab + 1):  # order 1: one row per previous token and the start
            own = kind if rng.random() < _OWN_KIND else rng.choice(KINDS)
            target_row, draft_row = _pair_rows(own, vocab, eps, rng)
            target_rows.append(target_row)
            draft_rows.append(draft_row)
        pair = ToyPair(_model(vocab, target_rows), _model(vocab, draft_rows))
        scenario = Scenario(
            f"coverage-{index}-{kind}-v{vocab}-k{k}",
            f"coverage search: {kind} rows at scale {scale:.3g}",
            pair,
            (rng.randrange(vocab),),
            k,
        )
        if acceptance_mass(scenario, step=False) > 0:
            yield scenario
