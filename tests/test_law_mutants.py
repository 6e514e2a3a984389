"""Every public law function that takes a rule, given the rule with its thresholds moved.

A mutant (``scaled``) decides ``u < scale * threshold`` where the rule decides ``u < threshold``
(its tested uniforms divided by ``scale``; with ``final``, every uniform, so an inverse-CDF
draw's steps move too). With ``scale`` 0.999 or 1.001 it is lossy wherever a threshold lies
strictly inside ``(0, 1)``. The functions that cut the uniforms at *declared* cuts (the rule's
definition: ``exact.block_law``, ``exact.rows_law``, ``multi_law.rule_law`` and ``cell_law``,
``tree_law.tree_rule_law``, ``rule_law_at_steps``, ``paths_rule_law``,
``string_law.slem_torch_law``) must raise, naming the cut, or, told the mutant's own cuts,
give its law; the functions that discover the cuts (``specdec.discover``,
``specdec.discover_multi``, ``specdec.step_law``) must give the mutant its own, lossy law. The
real rules keep their exact laws. Deterministic: exact laws, no sampling (no error rate).
"""

import re
from collections.abc import Callable
from fractions import Fraction
from functools import partial
from typing import Any

import pytest
import torch

import specdec
from specdec.discover import ROUNDING_BOUND, discover_block_law, discover_rows_law, exact_verdict
from specdec.discover_multi import (
    discover_multi_law,
    discover_paths_law,
    discover_tree_law,
    multi_verdict,
    paths_verdict,
    tree_verdict,
)
from specdec.exact import (
    BlockRows,
    Law,
    block_breakpoints,
    block_law,
    completion_law,
    inverse_cdf_breakpoints,
    law_total_variation,
    rejection_breakpoints,
    rows_law,
    target_law,
)
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.multi_law import (
    candidate_law,
    cell_law,
    output_law,
    recursive_steps,
    rule_law,
    token_law,
)
from specdec.step_law import generation_law, step_block_law
from specdec.string_law import make_string_pair, slem_step_law, slem_torch_law
from specdec.traversal_law import traversal_block_law, traversal_rule_law
from specdec.tree_law import (
    TreeSteps,
    paths_block_law,
    paths_rule_law,
    rule_law_at_steps,
    tree_block_law,
    tree_rule_law,
    tree_steps,
)
from specdec.verify import exact_match_rule, verify_multi_iid, verify_paths, verify_tree
from specdec.verify.traversal import verify_traversal
from specdec.verify.tree import TokenTree

SCALES = (0.999, 1.001)
TOP = 1.0 - 2.0**-53
F = Fraction
PAIR = make_toy_pair(3, seed=0, closeness=F(1, 2))
SMALL = make_toy_pair(2, seed=3, closeness=F(1, 2))
PREFIX = (1,)


def scaled(rule: Callable[..., Any], scale: float, *, final: bool = False) -> Any:
    """``rule`` deciding ``u < scale * threshold``: every uniform but the last (the residual or
    bonus draw), or all with ``final``, becomes ``min(fl(u / scale), 1 - 2^-53)``."""

    def mutant(*args: Any) -> Any:
        *rest, uniforms = args
        tested = uniforms.shape[-1] if final else uniforms.shape[-1] - 1
        moved = (uniforms[..., :tested] / scale).clamp(max=TOP)
        return rule(*rest, torch.cat([moved, uniforms[..., tested:]], dim=-1))

    return mutant


def lossless(law: Law, target: ToyModel, prefix: tuple[int, ...], k: int) -> bool:
    return completion_law(law, target, prefix, k) == target_law(target, prefix, k + 1)


# -- the cell engines: (name, law of a rule, the real rule, its exact law's check, final) ---------

STAR = TokenTree(parents=(-1, -1, 0), draw="iid")
TRAVERSAL_TREE = TokenTree(parents=(-1, -1, 0), draw="without_replacement")
HALF, QUARTERS, THIRDS = (F(1, 2), F(1, 2)), (F(3, 4), F(1, 4)), (F(1, 3), F(2, 3))
ROWS = BlockRows((1,), (HALF,), (QUARTERS, THIRDS))  # accept x = 1 with (1/4) / (1/2)
ROWS_LAW = {(1, 0): F(1, 6), (1, 1): F(1, 3), (0,): F(1, 2)}  # rejected: residual (1, 0)
STRINGS = make_string_pair(5, ("a", "b", "ab"), ("a", "b", "ba"))


def _row_inverse_cdf(uniforms: torch.Tensor) -> torch.Tensor:
    """A user's evaluator for ``cell_law``: the inverse CDF of ``(1/4, 1/2, 1/4)``."""
    steps = torch.tensor([0.25, 0.75], dtype=torch.float64)
    return torch.searchsorted(steps, uniforms[:, :1].contiguous(), right=True)


CELL_ENGINES: list[tuple[str, Callable[[Any], Any], Any, Callable[[Any], bool], bool]] = [
    (
        "exact.block_law verify_tokens",
        lambda rule: block_law(rule, PAIR.target, PAIR.draft, PREFIX, 2),
        specdec.verify_tokens,
        lambda law: lossless(law, PAIR.target, PREFIX, 2),
        False,
    ),
    (
        "exact.block_law verify_block",
        lambda rule: block_law(
            rule, PAIR.target, PAIR.draft, PREFIX, 2, breakpoints=block_breakpoints
        ),
        specdec.verify_block,
        lambda law: lossless(law, PAIR.target, PREFIX, 2),
        False,
    ),
    (
        "exact.block_law exact_match_rule",
        lambda rule: block_law(
            rule, PAIR.target, PAIR.draft, PREFIX, 1, breakpoints=inverse_cdf_breakpoints
        ),
        exact_match_rule,
        lambda law: lossless(law, PAIR.target, PREFIX, 1),
        True,
    ),
    (
        "exact.rows_law verify_tokens",
        lambda rule: rows_law(rule, ROWS, breakpoints=rejection_breakpoints),
        specdec.verify_tokens,
        lambda law: law == ROWS_LAW,
        False,
    ),
    (
        "multi_law.cell_law a user's inverse CDF",
        lambda rule: cell_law(rule, [[F(1, 4), F(3, 4)]]),
        _row_inverse_cdf,
        lambda law: law == {(0,): F(1, 4), (1,): F(1, 2), (2,): F(1, 4)},
        True,
    ),
    (
        "tree_law.tree_rule_law verify_tree",
        lambda rule: tree_rule_law(rule, STAR, SMALL.target, SMALL.draft, PREFIX),
        verify_tree,
        lambda law: law == tree_block_law(STAR, SMALL.target, SMALL.draft, PREFIX),
        False,
    ),
    (
        "tree_law.rule_law_at_steps (traversal_rule_law) verify_traversal",
        lambda rule: traversal_rule_law(rule, TRAVERSAL_TREE, PAIR.target, PAIR.draft, PREFIX),
        verify_traversal,
        lambda law: law == traversal_block_law(TRAVERSAL_TREE, PAIR.target, PAIR.draft, PREFIX),
        False,
    ),
    (
        "tree_law.paths_rule_law verify_paths",
        lambda rule: paths_rule_law(rule, SMALL.target, SMALL.draft, PREFIX, 2, 1),
        verify_paths,
        lambda law: law == paths_block_law(SMALL.target, SMALL.draft, PREFIX, 2, 1),
        False,
    ),
    (
        "string_law.slem_torch_law verify_string_exact_match",
        lambda rule: slem_torch_law(STRINGS, (2,), m=2, k=2, rule=rule),
        specdec.verify.strings.verify_string_exact_match,
        lambda law: law == slem_step_law(STRINGS, (2,), m=2, k=2),
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "law_of", "rule", "exact", "final"), CELL_ENGINES, ids=[e[0] for e in CELL_ENGINES]
)
def test_a_cell_engine_keeps_the_real_rule_s_law_and_refuses_its_mutants(
    name: str, law_of: Callable[[Any], Any], rule: Any, exact: Callable[[Any], bool], final: bool
) -> None:
    assert exact(law_of(rule)), name
    for scale in SCALES:
        with pytest.raises(ValueError, match="changes inside a cell") as raised:
            law_of(scaled(rule, scale, final=final))
        assert "declared cuts" in str(raised.value) and "changes at u_" in str(raised.value)


def test_the_error_names_the_draft_block_the_cut_and_both_sides() -> None:
    """verify_tokens ×0.999 on one block: accept iff ``u_0 < 0.999 * 1/2``, declared at 1/2."""
    with pytest.raises(ValueError) as raised:
        rows_law(scaled(specdec.verify_tokens, 0.999), ROWS, breakpoints=rejection_breakpoints)
    message = str(raised.value)
    assert "(draft block (1,))" in message and "along u_0 between the declared cuts 0 and 1/2" in (
        message
    )
    assert "gives (1, 0) at" in message and "gives" in message and "(0, -1) at" in message
    assert "changes at u_0 = 0.4995" in message


def test_every_candidate_tuple_of_a_multi_draft_mutant_raises() -> None:
    """``rule_law`` of ``verify_multi_iid``: each tuple whose mutant decides otherwise (a reached
    candidate's threshold strictly inside ``(0, 1)``; no ratio ``p/q`` here is exactly 1) raises,
    naming the tuple; on the others (ratios 0 or above 1.001) the mutant decides as the rule,
    and its law is the rule's."""
    target_row, draft_row = (F(1, 6), F(1, 3), F(1, 2)), (F(1, 3), F(1, 2), F(1, 6))
    steps = partial(recursive_steps, target_row, draft_row, draw="iid")
    raised = 0
    for tokens in candidate_law(draft_row, 2, "iid"):
        thresholds, _ = steps(tokens)
        expected = output_law({tokens: F(1)}, steps)
        assert rule_law(verify_multi_iid, target_row, draft_row, tokens, steps) == expected
        reached = [t for i, t in enumerate(thresholds) if all(s < 1 for s in thresholds[:i])]
        for scale in SCALES:
            mutant = scaled(verify_multi_iid, scale)
            if not any(0 < t < 1 for t in reached):
                assert rule_law(mutant, target_row, draft_row, tokens, steps) == expected
                continue
            with pytest.raises(ValueError, match=re.escape(f"candidates {tokens}")):
                rule_law(mutant, target_row, draft_row, tokens, steps)
            raised += 1
    assert raised == 12  # tuples (0, *) and (1, *): thresholds 1/2 and 2/3, both scales


# -- told the mutant's own cuts, a cell engine gives its law -----------------------------------


def scaled_rejection(scale: float) -> Callable[[BlockRows], list[list[Fraction]]]:
    """The mutant's cuts: ``min(1, scale min(1, p/q))`` on each tested uniform (where ``p/q``
    is above 1 and the mutant still always accepts, a cut it never uses: harmless)."""

    def cuts(rows: BlockRows) -> list[list[Fraction]]:
        declared = rejection_breakpoints(rows)
        tested = [[min(F(1), F(scale) * c) for c in cut] for cut in declared[:-1]]
        return [*tested, declared[-1]]

    return cuts


@pytest.mark.parametrize("scale", SCALES)
def test_a_mutant_with_its_own_cuts_gets_its_own_lossy_law_and_discovery_agrees(
    scale: float,
) -> None:
    """``block_law`` told the mutant's cuts gives its law; ``discover_block_law``,
    ``discover_rows_law`` and ``step_block_law`` find the same law (to float64 rounding) from
    the mutant's decisions alone, and it is lossy."""
    mutant = scaled(specdec.verify_tokens, scale)
    own = block_law(
        mutant, SMALL.target, SMALL.draft, PREFIX, 1, breakpoints=scaled_rejection(scale)
    )
    assert not lossless(own, SMALL.target, PREFIX, 1)
    found = discover_block_law(mutant, SMALL.target, SMALL.draft, PREFIX, 1)
    assert found.law is not None and law_total_variation(found.law, own) <= ROUNDING_BOUND
    step = step_block_law(SMALL.target, SMALL.draft, PREFIX, 1, rule=mutant)
    assert step.law is not None and law_total_variation(step.law, own) <= ROUNDING_BOUND
    rows = BlockRows((1,), (HALF,), (QUARTERS, THIRDS))
    alone = discover_rows_law(mutant, rows)
    told = rows_law(mutant, rows, breakpoints=scaled_rejection(scale))
    assert alone.law is not None and law_total_variation(alone.law, told) <= ROUNDING_BOUND
    assert told != ROWS_LAW


@pytest.mark.parametrize("scale", SCALES)
def test_discovery_gives_multi_draft_and_tree_mutants_their_own_lossy_laws(scale: float) -> None:
    """``discover_multi_law`` equals the mutant's rational law (thresholds ``min(1, scale t)``)
    to rounding; ``discover_tree_law`` equals ``rule_law_at_steps`` told the mutant's steps;
    ``discover_paths_law`` and ``generation_law`` are lossy."""
    target_row, draft_row = (F(1, 6), F(1, 3), F(1, 2)), (F(1, 3), F(1, 2), F(1, 6))

    def moved(tokens: Any) -> tuple[list[Fraction], tuple[Fraction, ...]]:
        """The mutant's thresholds ``min(1, scale p/q)``: a threshold 1 stays 1, every ratio
        ``p/q`` here being 0, 1/2, 2/3 or at least 3."""
        thresholds, final = recursive_steps(target_row, draft_row, tokens, "iid")
        return [min(F(1), F(scale) * t) if t < 1 else t for t in thresholds], final

    found = discover_multi_law(scaled(verify_multi_iid, scale), target_row, draft_row, 2, "iid")
    exact = token_law(output_law(candidate_law(draft_row, 2, "iid"), moved))
    assert found.law is not None and not multi_verdict(found, target_row).lossless
    assert law_total_variation(found.law, {(x,): v for x, v in exact.items()}) <= ROUNDING_BOUND

    tree_mutant = scaled(verify_tree, scale)

    def steps_of(tokens: Any) -> TreeSteps:
        steps = tree_steps(STAR, SMALL.target, SMALL.draft, PREFIX, tokens)
        return TreeSteps(tuple(min(F(1), F(scale) * t) for t in steps.thresholds), steps.finals)

    told = rule_law_at_steps(tree_mutant, STAR, SMALL.target, SMALL.draft, PREFIX, steps_of)
    tree = discover_tree_law(tree_mutant, STAR, SMALL.target, SMALL.draft, PREFIX)
    assert tree.law is not None and law_total_variation(tree.law, told) <= ROUNDING_BOUND
    assert not tree_verdict(tree, STAR, SMALL.target, PREFIX).lossless

    paths = discover_paths_law(scaled(verify_paths, scale), SMALL.target, SMALL.draft, PREFIX, 2, 1)
    assert not paths_verdict(paths, SMALL.target, PREFIX, 1).lossless
    generated = generation_law(
        SMALL.target,
        SMALL.draft,
        PREFIX,
        k=1,
        max_new_tokens=2,
        rule=scaled(specdec.verify_tokens, scale),
    )
    assert generated.law is not None
    verdict = exact_verdict(generated.law, target_law(SMALL.target, PREFIX, 2))
    assert not verdict.lossless
