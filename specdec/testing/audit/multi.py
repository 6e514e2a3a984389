"""The audit of multi-draft and tree rules: their own signatures, their own battery, two modes.

A multi-draft rule (``specdec.verify.multi.MultiDraftRule``: ``k`` candidates at one position)
or a tree rule (``verify_tree``'s arguments) is lossless only for the candidate draw it assumes,
so the audit is told the draw and judges the rule on scenarios drawn that way
(``multi_battery``: chosen so that every known bug of ``specdec.testing.zoo.MULTI_ZOO`` shows
on each of them; ``proofs/theory.md``, claims 16 and 17).

* **Exact** (the default, ``exact=True``): for each scenario the rule's exact law is discovered
  from its own decisions (``specdec.discover_multi``, the claim-14 grid engine: no sampling, no
  breakpoints supplied by the rule) and compared with the target's
  (``specdec.discover.exact_verdict``: an outcome the target forbids, or a total variation
  above float64 rounding, is lossy). Verdicts ``lossless`` (on these scenarios), ``lossy``,
  ``cannot decide`` (a law could not be computed: hidden randomness, a rule outside the
  interval-decided class), with the main audit's exit codes 0, 1, 3.
* **Statistical** (``exact=False``, ``multi_sampled``): candidates drawn, uniforms fed from a
  seeded generator, the emitted token (position) or completed block (tree) tested against the
  target's exact law by the L1 test and the forbidden-outcome check: ``lossless`` ("no
  deviation of TV >= x found, false-fail f, false-pass b"), ``lossy``, ``inconclusive`` (the
  power fell below ``min_power_tv``), exit codes 0, 1, 3. The fallback for engines' verifiers
  the exact engine cannot enumerate.
"""

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, TypeVar, overload

from specdec.discover import ExactVerdict
from specdec.discover_multi import (
    MultiDiscovery,
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.models.toy import make_toy_pair
from specdec.multi_law import Draw
from specdec.testing.audit.audits import check_audit_options
from specdec.testing.audit.multi_battery import (
    PositionScenario,
    TreeScenario,
    position_scenarios,
    tree_scenarios,
)
from specdec.testing.audit.multi_sampled import MultiSampledReport, sampled_audit
from specdec.testing.audit.report import VERDICT_EXIT
from specdec.testing.audit.run import threads
from specdec.verify.tree import TokenTree

__all__ = [
    "DRAWS",
    "MultiAuditReport",
    "MultiScenarioResult",
    "PositionScenario",
    "TreeScenario",
    "audit_multi_draft",
    "audit_tree",
    "position_scenarios",
    "tree_scenarios",
]

DRAWS = ("iid", "without_replacement", "point_mass")
"""The candidate draws the audit knows (``specdec.multi_law.Draw``)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MultiScenarioResult:
    """One scenario's exact verdict.

    Attributes:
        scenario: its name.
        status: the discovery's status (``"exact"`` or why no law was found).
        lossless: the exact verdict, ``None`` without a law.
        total_variation: exact distance from the target's law, ``None`` without a law.
        evidence: the verdict's sentence, or why no law was found.
    """

    scenario: str
    status: str
    lossless: bool | None
    total_variation: Fraction | None
    evidence: str


@dataclass(frozen=True)
class MultiAuditReport:
    """The exact audit of one multi-draft or tree rule.

    Attributes:
        rule: the rule's name.
        kind: ``"position"`` or ``"tree"``.
        draw: the candidate draw it was judged on.
        results: one ``MultiScenarioResult`` per scenario.
        seconds: wall time.
    """

    rule: str
    kind: Literal["position", "tree"]
    draw: Draw
    results: tuple[MultiScenarioResult, ...]
    seconds: float = 0.0

    @property
    def mode(self) -> str:
        """``"exact"``."""
        return "exact"

    @property
    def lossy(self) -> bool:
        """Some scenario's exact law differs from the target's."""
        return any(r.lossless is False for r in self.results)

    @property
    def verdict(self) -> str:
        """``"lossy"``, ``"cannot decide"`` (a scenario got no law) or ``"lossless"`` (exact, on
        these scenarios only: the verdict claims nothing beyond them)."""
        if self.lossy:
            return "lossy"
        if any(r.lossless is None for r in self.results):
            return "cannot decide"
        return "lossless"

    @property
    def lossless(self) -> bool:
        """Whether every scenario's exact law is the target's (within rounding)."""
        return self.verdict == "lossless"

    @property
    def exit_code(self) -> int:
        """0 lossless, 1 lossy, 3 cannot decide (the main audit's codes)."""
        return int(
            VERDICT_EXIT["inconclusive" if self.verdict == "cannot decide" else self.verdict]
        )

    def headline(self) -> str:
        """The verdict in one line with what was checked."""
        where = f"on {len(self.results)} {self.kind} scenario(s), candidates drawn {self.draw}"
        if self.verdict == "lossy":
            lossy = [r for r in self.results if r.lossless is False]
            distances = ", ".join(
                f"{r.scenario} TV {float(r.total_variation or 0):.4g}" for r in lossy
            )
            return f"LOSSY (exact): {distances} ({where})"
        if self.verdict == "cannot decide":
            undecided = [r.scenario for r in self.results if r.lossless is None]
            return f"CANNOT DECIDE (exact): no law for {', '.join(undecided)} ({where})"
        return f"LOSSLESS (exact, {where})"

    def format(self) -> str:
        """A human-readable report."""
        option = "multi-draft" if self.kind == "position" else "tree"
        lines = [
            f"specdec audit --exact --{option} {self.draw} of {self.rule}: {self.headline()}",
            "  exact laws on the uniforms' 2^-53 grid; lossy iff an outcome the target forbids "
            "occurs or the TV exceeds float64 rounding",
            "",
            f"  {'scenario':<20} {'exact TV':>10}  result",
        ]
        for r in self.results:
            if r.lossless is None:
                lines.append(f"  {r.scenario:<20} {'-':>10}  {r.status}: {r.evidence}")
                continue
            tv = float(r.total_variation or 0)
            lines.append(f"  {r.scenario:<20} {tv:>10.4g}  {'ok' if r.lossless else 'LOSSY'}")
        lines.append(f"\n  {len(self.results)} scenarios in {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_json(self) -> str:
        """The whole report as JSON: ``verdict``, ``mode``, ``exit_code``, ``headline`` and
        every scenario; fractions as strings."""
        document = {
            "verdict": self.verdict,
            "mode": self.mode,
            "exit_code": self.exit_code,
            "headline": self.headline(),
            "rule": self.rule,
            "kind": self.kind,
            "draw": self.draw,
            "seconds": self.seconds,
            "results": [
                {
                    "scenario": r.scenario,
                    "status": r.status,
                    "lossless": r.lossless,
                    "total_variation": None
                    if r.total_variation is None
                    else str(r.total_variation),
                    "evidence": r.evidence,
                }
                for r in self.results
            ],
        }
        return json.dumps(document, indent=2)


def _name(rule: object) -> str:
    return str(getattr(rule, "__name__", type(rule).__name__))


def _check(
    rule: object,
    draw: str,
    exact: bool,
    scenarios: Sequence[object] | None,
    options: dict[str, Any],
    num_threads: int | None,
) -> None:
    """The caller's options, before the rule is ever called."""
    if not callable(rule):
        raise TypeError(f"rule must be callable, got {type(rule).__name__}.")
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {', '.join(DRAWS)}, got {draw!r}.")
    if scenarios is not None and not scenarios:
        raise ValueError("scenarios must hold at least one scenario, got none.")
    if exact:
        given = [k for k in ("samples", "detect_tv", "min_power_tv") if options[k] is not None]
        if given:
            raise ValueError(f"exact=True takes none of {', '.join(given)} (no sampling).")
    check_audit_options(**options, num_threads=num_threads)


@overload
def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
    *,
    exact: Literal[True] = True,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport: ...


@overload
def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
    *,
    exact: Literal[False],
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiSampledReport: ...


@overload
def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
    *,
    exact: bool,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport | MultiSampledReport: ...


def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
    *,
    exact: bool = True,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport | MultiSampledReport:
    r"""Audit a multi-draft rule on candidates drawn as ``draw`` says: does it emit ``p``?

    The criterion: at one position, ``k`` candidates drawn from ``q`` as ``draw`` says, the
    emitted token's law must be the target's,

    .. math:: \Pr(\text{token} = x) = p(x) \quad \text{for every } x,

    (``proofs/theory.md``, claim 16; SpecInfer, Miao et al. 2024, sec. 4; SpecTr, Sun et al.
    2023, sec. 3), checked exactly or by sampling (module docstring).

    Args:
        rule: ``rule(draft_tokens [N, k], draft_probs [N, V], target_probs [N, V], uniforms
            [N, k+1]) -> result`` with ``result.token [N]`` (``MultiDraftRule``).
        draw: ``"iid"``, ``"without_replacement"`` or ``"point_mass"`` (the draft's top-``k``).
        scenarios: the battery (default ``position_scenarios()``).
        exact: the exact audit (default); ``False``: the statistical one.
        samples: (statistical) draws per scenario, fixed; at most one of it and ``detect_tv``.
        false_fail_rate: (statistical) family-wise over the scenarios (Holm).
        false_pass_rate: (statistical) per scenario, at its detectable distance.
        detect_tv: (statistical) size each scenario to detect TV ``>= detect_tv`` (default 0.01).
        min_power_tv: (statistical) ``inconclusive`` below this power (default 0.05, or
            ``detect_tv`` when larger).
        seed: the exploration seed (exact) or of everything drawn (statistical).
        progress: called with one line per finished scenario.
        num_threads: torch intra-op threads while the audit runs (default 1, as the main
            audit's: the tensors are small and on a shared machine torch's thread pool costs
            more than it saves; ``None`` keeps torch's setting).

    Returns:
        A ``MultiAuditReport`` (exact) or ``MultiSampledReport`` (statistical). Exceptions
        raised by ``rule`` propagate; (statistical) an output that is not ``[N]`` token ids
        raises ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an unknown draw, an empty battery, sampling options with
            ``exact=True``, an invalid option (``check_audit_options``), before ``rule`` is
            called.

    Example:
        >>> from specdec.testing.zoo import MULTI_ZOO
        >>> bug = MULTI_ZOO["draft_not_renormalised"]
        >>> audit_multi_draft(bug.rule, bug.draw).verdict
        'lossy'
        >>> audit_multi_draft(bug.rule, bug.draw, exact=False, detect_tv=0.03).verdict
        'lossy'
    """
    options = _options(samples, false_fail_rate, false_pass_rate, detect_tv, min_power_tv, seed)

    def decide(scenario: PositionScenario) -> tuple[MultiDiscovery, ExactVerdict | None]:
        found = discover_multi_law(
            rule, scenario.target_row, scenario.draft_row, scenario.k, draw, seed=seed
        )
        return found, None if found.law is None else multi_verdict(found, scenario.target_row)

    return _audit(
        rule,
        "position",
        draw,
        scenarios,
        position_scenarios,
        exact,
        options,
        num_threads,
        progress,
        decide,
    )


@overload
def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
    *,
    exact: Literal[True] = True,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport: ...


@overload
def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
    *,
    exact: Literal[False],
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiSampledReport: ...


@overload
def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
    *,
    exact: bool,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport | MultiSampledReport: ...


def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
    *,
    exact: bool = True,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    num_threads: int | None = 1,
) -> MultiAuditReport | MultiSampledReport:
    r"""Audit a tree rule (``verify_tree``'s arguments) on trees drawn as ``draw`` says.

    The criterion: the emitted block, completed to ``depth + 1`` tokens by sampling the target,
    must have the target's joint law,

    .. math:: \Pr(x_{1:d+1}) = \prod_{i=1}^{d+1} p(x_i \mid \text{prefix}, x_{<i}),

    (``proofs/theory.md``, claim 17; SpecInfer, Miao et al. 2024, sec. 4), checked exactly or by
    sampling (module docstring). Arguments as in ``audit_multi_draft``, except:

    Args:
        rule: ``rule(tree, draft_tokens [N, nodes], draft_probs [N, nodes+1, V], target_probs
            [N, nodes+1, V], uniforms [N, nodes+1]) -> result`` with ``result.tokens
            [N, depth+1]`` (``-1``-padded; ``specdec.verify.verify_tree``).
        scenarios: the battery (default ``tree_scenarios()``).

    Example:
        >>> from specdec.verify import verify_tree
        >>> audit_tree(verify_tree, "point_mass", tree_scenarios()[:1]).headline()
        'LOSSLESS (exact, on 1 tree scenario(s), candidates drawn point_mass)'
    """
    options = _options(samples, false_fail_rate, false_pass_rate, detect_tv, min_power_tv, seed)

    def decide(scenario: TreeScenario) -> tuple[MultiDiscovery, ExactVerdict | None]:
        pair = make_toy_pair(scenario.vocab, seed=scenario.seed, closeness=scenario.closeness)
        tree = TokenTree(parents=scenario.parents, draw=draw)
        found = discover_tree_law(rule, tree, pair.target, pair.draft, scenario.prefix, seed=seed)
        if found.law is None:
            return found, None
        return found, tree_verdict(found, tree, pair.target, scenario.prefix)

    return _audit(
        rule,
        "tree",
        draw,
        scenarios,
        tree_scenarios,
        exact,
        options,
        num_threads,
        progress,
        decide,
    )


S = TypeVar("S", PositionScenario, TreeScenario)


def _audit(
    rule: Callable[..., Any],
    kind: Literal["position", "tree"],
    draw: Draw,
    scenarios: Sequence[S] | None,
    default_battery: Callable[[], list[S]],
    exact: bool,
    options: dict[str, Any],
    num_threads: int | None,
    progress: Progress | None,
    decide: Callable[[S], tuple[MultiDiscovery, ExactVerdict | None]],
) -> MultiAuditReport | MultiSampledReport:
    """Both audits: check the options, then sample (``sampled_audit``) or decide every scenario
    exactly with ``decide`` (the scenario's discovered law and its verdict, ``None`` without a
    law)."""
    _check(rule, draw, exact, scenarios, options, num_threads)
    battery = list(default_battery() if scenarios is None else scenarios)
    with threads(num_threads):
        if not exact:
            return sampled_audit(
                rule, kind, draw, battery, name=_name(rule), progress=progress, **options
            )
        start = time.perf_counter()
        results: list[MultiScenarioResult] = []
        for index, scenario in enumerate(battery):
            results.append(_result(scenario.name, *decide(scenario)))
            _report(progress, index, len(battery), results[-1])
        return MultiAuditReport(
            _name(rule), kind, draw, tuple(results), time.perf_counter() - start
        )


def _options(
    samples: int | None,
    false_fail_rate: float,
    false_pass_rate: float,
    detect_tv: float | None,
    min_power_tv: float | None,
    seed: int,
) -> dict[str, Any]:
    return {
        "samples": samples,
        "false_fail_rate": false_fail_rate,
        "false_pass_rate": false_pass_rate,
        "detect_tv": detect_tv,
        "min_power_tv": min_power_tv,
        "seed": seed,
    }


def _result(
    scenario: str, found: MultiDiscovery, verdict: ExactVerdict | None
) -> MultiScenarioResult:
    if verdict is None:
        return MultiScenarioResult(scenario, found.status, None, None, found.evidence)
    return MultiScenarioResult(
        scenario, found.status, verdict.lossless, verdict.total_variation, verdict.describe()
    )


def _report(progress: Progress | None, index: int, total: int, result: MultiScenarioResult) -> None:
    if progress is None:
        return
    outcome = (
        result.status
        if result.lossless is None
        else (
            f"{'lossless' if result.lossless else 'LOSSY'}, exact TV "
            f"{float(result.total_variation or 0):.3g}"
        )
    )
    progress(f"[{index + 1}/{total}] {result.scenario}: {outcome}")
