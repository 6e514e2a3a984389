r"""The statistical audit of multi-draft and tree rules: sampled laws against the exact target law.

The exact audit (``specdec.testing.audit.multi``) cannot decide a rule whose randomness it
cannot enumerate or that is not interval-decided (an engine's verifier); this audit samples
instead, on the same battery (``multi_battery``) and draws:

* **position** (a ``MultiDraftRule``): ``n`` candidate tuples drawn from the draft row as the
  draw says (``specdec.testing.simulate_tree.draft_candidates``: i.i.d.; without replacement;
  the draft's top-``k``), uniforms ``[n, k+1]`` from a seeded generator of their own; the cells
  are the ``V`` emitted tokens and the expected law is the target row: a lossless rule emits
  exactly ``p`` (``proofs/theory.md``, claim 16).
* **tree** (``verify_tree``'s arguments): ``n`` trees drafted from the toy draft, every node's
  children as the draw says (``draft_tree_batch``), uniforms ``[n, nodes+1]``, the emitted
  block completed to ``depth+1`` tokens from the target; the cells are the ``V^(depth+1)``
  sequences and the expected law ``target_law(target, prefix, depth+1)`` (claim 17).

Decision. Each scenario's L1 test (``specdec.testing.stats``) gives a p-value valid at any
``n`` (``l1_p_value``); Holm's procedure over the ``S`` p-values at ``alpha =
false_fail_rate`` marks scenarios lossy, so the family-wise false-fail rate is at most
``alpha``; an emitted outcome the target forbids is a certain rejection (rate 0). Power: Holm
rejects every p-value at or below its first level ``alpha / S``, so the L1 test at that level
bounds the decision's power. Each scenario draws the formula of ``plan.samples_for_tv`` over
its ``m`` cells (no pooling: the cells are few),

.. math:: n = \left\lceil \frac{\big(\sqrt{m\ln2 + \ln(S/\alpha)} +
    \sqrt{m\ln2 + \ln(1/\beta)}\big)^2}{2\,\delta^2} \right\rceil,

and then detects any deviation of total variation ``>= delta = detect_tv`` over its cells with
false-pass rate ``<= beta``. With ``samples`` fixed the report states the distance that bought
(``min_detectable_tv_by_l1``), and a passing audit some of whose scenarios cannot detect
``min_power_tv`` is ``inconclusive``. A verdict claims no more than that, on these scenarios
and this draw.
"""

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_emitted_blocks
from specdec.exact import target_law
from specdec.models.toy import make_toy_pair
from specdec.multi_law import Draw
from specdec.noise import uniforms
from specdec.testing.audit.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.plan import DETECT_TV_BATCHED, MIN_POWER_TV, chunk_sizes
from specdec.testing.audit.report import VERDICT_EXIT
from specdec.testing.audit.run import InvalidOutputError
from specdec.testing.simulate import complete_blocks
from specdec.testing.simulate_tree import draft_candidates, draft_tree_batch
from specdec.testing.stats import (
    decode_sequence,
    encode_sequences,
    holm,
    l1_p_value,
    l1_test,
    law_tensor,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
)
from specdec.verify.tree import TokenTree

__all__ = [
    "MultiSampledReport",
    "MultiSampledResult",
    "sample_position_counts",
    "sample_tree_counts",
    "sampled_audit",
]

Kind = Literal["position", "tree"]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class MultiSampledResult:
    """One scenario of the statistical audit.

    Attributes:
        scenario: its name.
        samples: draws (emitted tokens or completed blocks).
        num_cells: ``m``, the cells of the L1 test (``V`` or ``V^(depth+1)``).
        l1_distance: observed L1 distance from the target's law.
        l1_threshold: the L1 test's threshold at Holm's first level ``alpha / S``.
        p_value: the L1 test's p-value (0 when an outcome the target forbids was emitted).
        detectable_tv: the total variation the L1 test detects at Holm's first level with the
            report's false-pass rate: the power this scenario had.
        forbidden_outcomes: draws the target gives probability 0.
        worst_cells: up to five ``(outcome, observed, expected)`` with the largest deviations.
        lossy: Holm rejected it, or a forbidden outcome was seen.
        samples_to_decide: when ``detectable_tv`` is above the minimum power, the sample size
            that detects the minimum; else 0.
    """

    scenario: str
    samples: int
    num_cells: int
    l1_distance: float
    l1_threshold: float
    p_value: float
    detectable_tv: float
    forbidden_outcomes: int
    worst_cells: tuple[tuple[tuple[int, ...], int, float], ...]
    lossy: bool = False
    samples_to_decide: int = 0


@dataclass(frozen=True)
class MultiSampledReport:
    """The statistical audit of one multi-draft or tree rule (the exact one's sibling).

    Attributes:
        rule: the rule's name.
        kind: ``"position"`` or ``"tree"``.
        draw: the candidate draw it was judged on.
        results: one ``MultiSampledResult`` per scenario.
        false_fail_rate: family-wise rate of calling a lossless rule lossy.
        false_pass_rate: per scenario, at its ``detectable_tv``.
        detect_tv: the distance the sample sizes were chosen to detect (``None`` when
            ``samples`` fixed them).
        min_power_tv: a passing audit whose scenarios do not all detect this is inconclusive.
        seconds: wall time.
    """

    rule: str
    kind: Kind
    draw: Draw
    results: tuple[MultiSampledResult, ...]
    false_fail_rate: float
    false_pass_rate: float
    detect_tv: float | None
    min_power_tv: float
    seconds: float

    @property
    def mode(self) -> str:
        """``"statistical"``."""
        return "statistical"

    @property
    def lossy(self) -> bool:
        """Some scenario's sampled law was rejected."""
        return any(r.lossy for r in self.results)

    @property
    def verdict(self) -> str:
        """``"lossy"``, ``"inconclusive"`` (some scenario's power is below ``min_power_tv``) or
        ``"lossless"`` (no deviation of ``detectable_tv`` found on these scenarios)."""
        if self.lossy:
            return "lossy"
        if any(r.detectable_tv > self.min_power_tv for r in self.results):
            return "inconclusive"
        return "lossless"

    @property
    def lossless(self) -> bool:
        """Whether the audit passed."""
        return self.verdict == "lossless"

    @property
    def exit_code(self) -> int:
        """The verdict's exit code (``report.VERDICT_EXIT``: 0, 1 or 3)."""
        return int(VERDICT_EXIT[self.verdict])

    @property
    def detectable_tv(self) -> float:
        """The worst scenario's detectable distance."""
        return max(r.detectable_tv for r in self.results)

    def headline(self) -> str:
        """The verdict in one line with what was checked; never a bare LOSSLESS."""
        rates = f"false-fail {self.false_fail_rate:g}, false-pass {self.false_pass_rate:g}"
        where = f"on {len(self.results)} {self.kind} scenario(s), candidates drawn {self.draw}"
        if self.verdict == "lossy":
            lossy = [r for r in self.results if r.lossy]
            tests = ", ".join(
                f"{r.scenario} by "
                + ("forbidden outcome" if r.forbidden_outcomes else f"L1 (p = {r.p_value:.3g})")
                for r in lossy
            )
            return f"LOSSY: {len(lossy)} scenario(s): {tests} ({where})"
        if self.verdict == "inconclusive":
            weak = [r for r in self.results if r.detectable_tv > self.min_power_tv]
            return (
                f"INCONCLUSIVE: no deviation found, but {len(weak)} scenario(s) detect only "
                f"TV >= {max(r.detectable_tv for r in weak):.4f}, above the minimum "
                f"{self.min_power_tv:g}; {max(r.samples_to_decide for r in weak)} samples per "
                f"scenario would decide (--detect-tv {self.min_power_tv:g}) ({rates}; {where})"
            )
        return f"LOSSLESS: no deviation of TV >= {self.detectable_tv:.4f} found ({rates}) {where}"

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"specdec audit --{'multi-draft' if self.kind == 'position' else 'tree'} "
            f"{self.draw} of {self.rule}: {self.headline()}",
            f"  family-wise false-fail rate <= {self.false_fail_rate:g} (Holm over the L1 "
            f"tests); each scenario detects a total-variation distance >= its 'detects' value "
            f"with false-pass rate <= {self.false_pass_rate:g}"
            + (f" (samples chosen to detect {self.detect_tv:g})" if self.detect_tv else ""),
            "",
            f"  {'scenario':<20} {'n':>9} {'cells':>5} {'detects':>8} {'L1':>8} "
            f"{'threshold':>9} {'p-value':>9}  result",
        ]
        for r in self.results:
            result = "LOSSY" if r.lossy else "ok"
            if r.forbidden_outcomes:
                result += f" ({r.forbidden_outcomes} outcome(s) the target forbids)"
            if not r.lossy and r.detectable_tv > self.min_power_tv:
                result += f", underpowered (needs {r.samples_to_decide})"
            lines.append(
                f"  {r.scenario:<20} {r.samples:>9} {r.num_cells:>5} {r.detectable_tv:>8.4f} "
                f"{r.l1_distance:>8.4f} {r.l1_threshold:>9.4f} {r.p_value:>9.3g}  {result}"
            )
        for r in self.results:
            if r.lossy:
                lines += ["", f"  {r.scenario}: largest deviations"]
                for outcome, observed, expected in r.worst_cells:
                    label = " ".join(map(str, outcome))
                    lines.append(
                        f"    {label:<16} observed {observed:>8}  expected {expected:>10.1f}"
                    )
        total = sum(r.samples for r in self.results)
        lines.append(f"\n  {total} samples in {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_json(self) -> str:
        """The whole report as JSON: ``verdict``, ``mode``, ``exit_code``, ``headline`` and
        every field."""
        document = {
            "verdict": self.verdict,
            "mode": self.mode,
            "exit_code": self.exit_code,
            "headline": self.headline(),
            **dataclasses.asdict(self),
            "detectable_tv": self.detectable_tv,
        }
        return json.dumps(document, indent=2)


def _rows(row: Sequence[Fraction], size: int) -> Float[Tensor, "size vocab"]:
    return torch.tensor([[float(v) for v in row]] * size, dtype=torch.float64)


def sample_position_counts(
    rule: Callable[..., Any],
    scenario: PositionScenario,
    draw: Draw,
    samples: int,
    data: torch.Generator,
    noise: torch.Generator,
) -> Int[Tensor, " vocab"]:
    """How often ``rule`` emits each token over ``samples`` candidate tuples drawn as ``draw``
    says (from ``data``), its uniforms ``[n, k+1]`` from ``noise``.

    Raises:
        InvalidOutputError: the rule's ``token`` is not ``[n]`` integer ids in ``[0, V)``.

    Example:
        >>> from specdec.testing.audit.multi_battery import position_scenarios
        >>> from specdec.verify import verify_multi_iid
        >>> data, noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        >>> scenario = position_scenarios()[0]
        >>> counts = sample_position_counts(verify_multi_iid, scenario, "iid", 1000, data, noise)
        >>> int(counts.sum()), int(counts[3])  # token 3 has target probability 0
        (1000, 0)
    """
    vocab, k = len(scenario.target_row), scenario.k
    counts = torch.zeros(vocab, dtype=torch.int64)
    for size in chunk_sizes(samples, is_batch=True):
        draft, target = _rows(scenario.draft_row, size), _rows(scenario.target_row, size)
        tokens = draft_candidates(draft, k, draw, data)
        out = rule(tokens, draft, target, uniforms(noise, (size, k + 1)))
        emitted = getattr(out, "token", None)
        if not isinstance(emitted, Tensor) or emitted.dtype not in (torch.int64, torch.int32):
            raise InvalidOutputError(
                f"expected a result with an integer tensor .token, got {type(out).__name__}."
            )
        if tuple(emitted.shape) != (size,):
            raise InvalidOutputError(f"expected .token of shape {(size,)}, got {emitted.shape}.")
        if bool((emitted < 0).any() or (emitted >= vocab).any()):
            raise InvalidOutputError(f"emitted token ids must lie in [0, {vocab}).")
        counts += torch.bincount(emitted.long().cpu(), minlength=vocab)
    return counts


def sample_tree_counts(
    rule: Callable[..., Any],
    scenario: TreeScenario,
    draw: Draw,
    samples: int,
    data: torch.Generator,
    noise: torch.Generator,
) -> Int[Tensor, " sequences"]:
    """How often each ``depth+1``-token sequence results from ``rule``'s emitted block on trees
    drafted as ``draw`` says (``data``), completed from the target (``data``); its uniforms
    ``[n, nodes+1]`` from ``noise``.

    Raises:
        InvalidOutputError: the rule's ``tokens`` are not ``[n, depth+1]`` emitted blocks.

    Example:
        >>> from specdec.testing.audit.multi_battery import tree_scenarios
        >>> from specdec.verify import verify_tree
        >>> data, noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        >>> counts = sample_tree_counts(verify_tree, tree_scenarios()[0], "iid", 500, data, noise)
        >>> tuple(counts.shape), int(counts.sum())  # 3^3 completed sequences
        ((27,), 500)
    """
    pair = make_toy_pair(scenario.vocab, seed=scenario.seed, closeness=scenario.closeness)
    tree = TokenTree(parents=scenario.parents, draw=draw)
    counts = torch.zeros(scenario.vocab ** (tree.depth + 1), dtype=torch.int64)
    for size in chunk_sizes(samples, is_batch=True):
        batch = draft_tree_batch(tree, pair.target, pair.draft, scenario.prefix, size, data)
        out = rule(
            tree,
            batch.tokens,
            batch.draft_probs,
            batch.target_probs,
            uniforms(noise, (size, tree.size + 1)),
        )
        tokens = getattr(out, "tokens", None)
        if isinstance(tokens, Tensor):
            tokens = tokens.cpu()
        blocks = check_emitted_blocks(tokens, size, tree.depth, scenario.vocab, InvalidOutputError)
        completed = complete_blocks(pair.target, scenario.prefix, blocks, data)
        codes = encode_sequences(completed, scenario.vocab)
        counts += torch.bincount(codes, minlength=counts.numel())
    return counts


def _cells(
    scenario: PositionScenario | TreeScenario,
) -> tuple[Float[Tensor, " cells"], int, int]:
    """The target's exact law over the scenario's cells (float64), ``V`` and the outcome's
    length (1 token, or ``depth+1`` for a tree)."""
    if isinstance(scenario, PositionScenario):
        return _rows(scenario.target_row, 1)[0], len(scenario.target_row), 1
    pair = make_toy_pair(scenario.vocab, seed=scenario.seed, closeness=scenario.closeness)
    length = TokenTree(parents=scenario.parents, draw="iid").depth + 1
    law = target_law(pair.target, scenario.prefix, length)
    return law_tensor(law, scenario.vocab, length), scenario.vocab, length


def sampled_audit(
    rule: Callable[..., Any],
    kind: Kind,
    draw: Draw,
    scenarios: Sequence[PositionScenario | TreeScenario],
    *,
    name: str,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> MultiSampledReport:
    """Sample every scenario, test, decide by Holm (module docstring); options are the
    caller's to check (``audit_multi_draft`` and ``audit_tree`` do).

    Exceptions raised by ``rule`` propagate; an output that is not an emitted token or block
    raises ``InvalidOutputError``.
    """
    start = time.perf_counter()
    level = false_fail_rate / len(scenarios)  # Holm's first level over the S L1 tests
    target_tv = None if samples is not None else (detect_tv or DETECT_TV_BATCHED)
    minimum = min_power_tv if min_power_tv is not None else max(MIN_POWER_TV, target_tv or 0.0)
    drawn: list[tuple[Tensor, int]] = []
    for index, scenario in enumerate(scenarios):
        cells = int(_cells(scenario)[0].numel())
        if samples is not None:
            n = samples
        else:
            n = min_sample_size_by_l1(cells, target_tv or DETECT_TV_BATCHED, level, false_pass_rate)
        data = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 1)
        noise = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 2)
        if isinstance(scenario, PositionScenario):
            counts = sample_position_counts(rule, scenario, draw, n, data, noise)
        else:
            counts = sample_tree_counts(rule, scenario, draw, n, data, noise)
        drawn.append((counts, n))
        if progress is not None:
            progress(f"[{index + 1}/{len(scenarios)}] {scenario.name}: n={n}")
    results = []
    for scenario, (counts, n) in zip(scenarios, drawn, strict=True):
        expected, vocab, length = _cells(scenario)
        test = l1_test(counts, expected, level)
        forbidden = int(counts[expected == 0].sum())
        detectable = min_detectable_tv_by_l1(test.num_cells, n, level, false_pass_rate)
        results.append(
            MultiSampledResult(
                scenario=scenario.name,
                samples=n,
                num_cells=test.num_cells,
                l1_distance=test.distance,
                l1_threshold=test.threshold,
                p_value=0.0 if forbidden else l1_p_value(test.distance, test.num_cells, n),
                detectable_tv=detectable,
                forbidden_outcomes=forbidden,
                worst_cells=tuple(
                    (decode_sequence(cell, vocab, length), observed, expected_count)
                    for cell, observed, expected_count in test.worst_cells
                ),
                samples_to_decide=0
                if detectable <= minimum
                else min_sample_size_by_l1(test.num_cells, minimum, level, false_pass_rate),
            )
        )
    rejected = holm([r.p_value for r in results], false_fail_rate)
    decided = tuple(
        dataclasses.replace(r, lossy=hit or r.forbidden_outcomes > 0)
        for r, hit in zip(results, rejected, strict=True)
    )
    return MultiSampledReport(
        name,
        kind,
        draw,
        decided,
        false_fail_rate,
        false_pass_rate,
        target_tv,
        minimum,
        time.perf_counter() - start,
    )
