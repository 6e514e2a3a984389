"""The independent oracles of claims 16 and 17 (``proofs/_oracles.py``) can tell a wrong rule
from a right one: each is compared with a known-wrong rational law written here, which it must
not equal, and K-SEQ below SpecTr's ``rho*`` is refused (its residual would be negative)."""

from fractions import Fraction

import pytest
from _common import constant_model
from _oracles import kseq_law, multi_draft_law, multi_draft_tuple_law, paths_law, tree_law

F = Fraction

P = (F(1, 6), F(1, 3), F(1, 2), F(0))
Q = (F(1, 2), F(1, 6), F(1, 6), F(1, 6))


def residual_not_updated(tokens: tuple[int, ...]) -> dict[tuple[int, int], F]:
    """Every candidate tested against ``p`` itself, the final token from ``p``: a known bug."""
    law: dict[tuple[int, int], F] = {}
    reach = F(1)
    for index, x in enumerate(tokens):
        accept = min(F(1), P[x] / Q[x])
        if reach * accept:
            law[(index, x)] = law.get((index, x), F(0)) + reach * accept
        reach *= 1 - accept
    for y, p_y in enumerate(P):
        if reach * p_y:
            law[(-1, y)] = law.get((-1, y), F(0)) + reach * p_y
    return law


def token_law(law: dict[tuple[int, int], F]) -> dict[int, F]:
    out: dict[int, F] = {}
    for (_, y), mass in law.items():
        out[y] = out.get(y, F(0)) + mass
    return out


def test_the_oracle_emits_p_and_a_known_bug_does_not() -> None:
    assert token_law(multi_draft_law(P, Q, 2, "iid")) == {0: P[0], 1: P[1], 2: P[2]}
    bug: dict[tuple[int, int], F] = {}
    for a in range(4):
        for b in range(4):
            for key, mass in residual_not_updated((a, b)).items():
                bug[key] = bug.get(key, F(0)) + Q[a] * Q[b] * mass
    assert bug != multi_draft_law(P, Q, 2, "iid")
    assert token_law(bug) != token_law(multi_draft_law(P, Q, 2, "iid"))
    assert residual_not_updated((0, 0)) != multi_draft_tuple_law(P, Q, (0, 0), "iid")


def test_the_draw_matters_to_the_oracle() -> None:
    # i.i.d. scoring of point-mass candidates (top-2 of q tested with min(1, p/q)) is lossy:
    target, draft = constant_model(P), constant_model(Q)
    scored = tree_law((-1, -1), "point_mass", target.probs, draft.probs, (0,), score="iid")
    first: dict[int, F] = {}
    for block, mass in scored.items():
        first[block[0]] = first.get(block[0], F(0)) + mass
    assert first != {x: v for x, v in enumerate(P) if v}


def test_kseq_below_rho_star_is_refused() -> None:
    assert token_law(kseq_law(P, Q, 2, F(2))) == {0: P[0], 1: P[1], 2: P[2]}  # rho = k is valid
    with pytest.raises(AssertionError, match="negative residual"):
        kseq_law(P, Q, 2, F(1))


def test_paths_of_one_are_a_chain() -> None:
    target, draft = constant_model(P), constant_model(Q)
    chain = tree_law((-1, 0), "iid", target.probs, draft.probs, (0,))
    assert paths_law(target.probs, draft.probs, (0,), 1, 2) == chain
    assert paths_law(target.probs, draft.probs, (0,), 2, 2) != chain
