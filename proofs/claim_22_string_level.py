"""Claim 22 (string-level rules for a draft with another tokenizer): string-level exact match
(SLEM) is lossless for any re-tokenization of the draft's text; string-level rejection sampling
(SLRS) is lossless when the verifier is told the proposal's own law ``ψ`` (a sum over every draft
token sequence whose text's longest target-token prefix is the proposed token); the likely
mistakes are lossy, at exact measured distances.

Checked: toy tokenizers encode canonically (``decode(encode(w)) = w`` for every text up to length
6; a non-canonical tokenization exists); on seeded toy pairs (three tokenizer pairs over ``{a,
b}``, one target vocabulary prefix-free), every context and ``(m, k)``: SLEM's exact law completes
to the target's law (``==``), the torch rule ``verify_string_exact_match`` has that law cell by
cell and, read from its own decisions (claim 14's engine: every cut confirmed by the rule's outputs
one grid step either side), within ``2^-40``, and so do the non-canonical and partial-last-dropped
proposals; ``ψ`` is a law, equals the prefix probability on the prefix-free target vocabulary and
differs from it elsewhere; SLRS's chain law completes to the target's, and ``verify_tokens`` told
``ψ`` (``block_law``, cell by cell) has that law; ``ψ`` equals the prefix probability minus its
minimal extensions' (``slrs_difference_row``) and the walk of ``specdec.string_bounds`` without
pruning, and the pruned walk's bounds contain ``ψ`` and ``Σ min(p, ψ)``; every lossy ``STRING_ZOO``
entry is at a positive exact distance on some scenario (the largest printed), every lossless entry
at 0 on all. See ``proofs/theory.md``, claim 22.
"""

import itertools
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import torch
from _common import quick, run_checks

import specdec
from specdec.discover import discover_rows_law, exact_verdict
from specdec.exact import (
    BlockRows,
    Law,
    block_law,
    completion_law,
    inverse_cdf_breakpoints,
    target_law,
)
from specdec.models.tokenizers import ToyTokenizer
from specdec.models.toy import ToyModel
from specdec.string_bounds import (
    StringVocabularies,
    slrs_acceptance_bounds,
    slrs_proposal_bounds,
    slrs_upper_row,
)
from specdec.string_law import (
    StringPair,
    draft_context,
    make_string_pair,
    slem_proposal_law,
    slem_step_law,
    slem_torch_law,
    slrs_difference_row,
    slrs_prefix_row,
    slrs_proposal_row,
    slrs_step_law,
    string_distance,
)
from specdec.testing.zoo import STRING_ZOO, audit_string_entry
from specdec.verify.strings import pad_proposals, verify_string_exact_match

# (target tokens, draft tokens): tokens prefixing others on both sides; a prefix-free target
TOKENIZER_PAIRS = [
    (("a", "b", "ab", "ba"), ("a", "b", "ab", "bb", "bab")),
    (("a", "b", "ab", "aab"), ("a", "b", "ba", "aa")),
    (("a", "b"), ("a", "b", "ab", "bba")),
]
SEEDS = range(2300, 2304)
CONTEXTS = ((), (0,), (2,), (1, 2))
SHAPES = ((1, 1), (2, 2), (3, 3))  # (m draft tokens, k target tokens)
ZOO_K = 2


def pairs() -> list[StringPair]:
    return [make_string_pair(seed, t, d) for seed in SEEDS for t, d in TOKENIZER_PAIRS]


def scenarios() -> list[tuple[StringPair, tuple[int, ...]]]:
    """Every pair with every context its target vocabulary can hold."""
    return [
        (pair, context)
        for pair in pairs()
        for context in CONTEXTS
        if all(t < pair.target.vocab_size for t in context)
    ]


def check_tokenizers() -> int:
    """Canonical encoding: decode(encode(w)) = w; some tokenizations are not canonical"""
    cases = 0
    for tokens in {t for pair in TOKENIZER_PAIRS for t in pair}:
        tokenizer = ToyTokenizer(tokens)
        for length in range(1, 7):
            for letters in itertools.product("ab", repeat=length):
                text = "".join(letters)
                ids = tokenizer.encode(text)
                assert tokenizer.decode(ids) == text and tokenizer.is_canonical(ids), text
                cases += 1
        if tokenizer.max_length > 1:  # a multi-character token spelled out is not canonical
            long = next(t for t in tokens if len(t) > 1)
            assert not tokenizer.is_canonical(tuple(tokens.index(c) for c in long)), long
    return cases


def check_slem_lossless() -> int:
    """SLEM: the exact step law completes to the target's law, every context and (m, k)"""
    cases = 0
    for pair, context in scenarios():
        for m, k in SHAPES:
            law = slem_step_law(pair, context, m=m, k=k)
            assert string_distance(law, pair, context, k) == 0, (context, m, k)
            cases += 1
    return cases


def check_slem_torch_rule() -> int:
    """SLEM: verify_string_exact_match's law, cell by cell, equals the exact law"""
    cases = 0
    for pair, context in quick(scenarios(), 12):
        for m, k in SHAPES[:2]:
            torch_law = slem_torch_law(pair, context, m=m, k=k)
            assert torch_law == slem_step_law(pair, context, m=m, k=k), (context, m, k)
            cases += 1
    return cases


StringRule = Callable[..., Any]  # (draft_tokens, lengths, target_probs, uniforms) -> Verification


def discovered_slem_law(
    rule: StringRule, pair: StringPair, context: Sequence[int], *, m: int, k: int
) -> Law:
    """The law of ``rule`` on SLEM's proposals from its own decisions (claim 14's engine): for
    each proposal of ``n`` tokens the rule is bound to it (its ``lengths`` fixed) and the cube of
    its ``k + 1`` uniforms refined on the ``2^-53`` grid until every box's corners agree, every
    candidate cut (the inverse-CDF steps of the target rows) kept only where the rule's output
    differs one grid step either side; rows past ``n`` are uniform (never read)."""
    law: Law = {}
    vocab = pair.target.vocab_size
    uniform = tuple(Fraction(1, vocab) for _ in range(vocab))
    for x, weight in slem_proposal_law(pair, context, m=m, k=k).items():
        n = len(x)
        block, lengths = pad_proposals([x], k)
        target_rows = [pair.target.probs((*context, *x[:i])) for i in range(n + 1)]
        rows = BlockRows(
            draft_tokens=tuple(block[0].tolist()),
            draft_rows=(uniform,) * k,  # not read by the rule
            target_rows=(*target_rows, *(uniform,) * (k - n)),
        )

        def bound(
            tokens: torch.Tensor,
            draft_probs: torch.Tensor,
            target_probs: torch.Tensor,
            uniforms: torch.Tensor,
            lengths: torch.Tensor = lengths,
        ) -> Any:
            return rule(tokens, lengths.expand(tokens.shape[0]), target_probs, uniforms)

        found = discover_rows_law(bound, rows, candidates=inverse_cdf_breakpoints)
        assert found.law is not None, (x, found.status, found.evidence)
        for emitted, prob in found.law.items():
            law[emitted] = law.get(emitted, Fraction(0)) + weight * prob
    return law


def check_slem_torch_rule_discovered(rule: StringRule = verify_string_exact_match) -> int:
    """SLEM: verify_string_exact_match's law from its own decisions is the exact law within
    2^-40, and completed from the target it is the target's law (the first 20 scenarios: two
    seeds of every tokenizer pair)"""
    cases = 0
    for pair, context in quick(scenarios()[:20], 6):
        for m, k in SHAPES[:2]:
            found = discovered_slem_law(rule, pair, context, m=m, k=k)
            verdict = exact_verdict(found, slem_step_law(pair, context, m=m, k=k))
            assert verdict.total_variation <= verdict.rounding_bound, (
                context,
                m,
                k,
                verdict.describe(),
            )
            completed = completion_law(found, pair.target, context, k)
            against_target = exact_verdict(completed, target_law(pair.target, context, k + 1))
            assert against_target.lossless, (context, m, k, against_target.describe())
            cases += 1
    return cases


def check_slem_any_proposal() -> int:
    """SLEM: non-canonical and partial-last-dropped re-tokenizations are lossless too"""
    cases = 0
    for name in ("slem_char_level", "slem_drop_partial_last"):
        entry = STRING_ZOO[name]
        for pair, context in scenarios():
            for k in (1, 2, 3):
                law = entry.law(pair, context, k)
                assert string_distance(law, pair, context, k) == 0, (name, context, k)
                cases += 1
    return cases


def check_slrs_proposal_law() -> int:
    """SLRS: ψ sums to 1; it is the prefix probability iff no target token prefixes another"""
    cases = differs = 0
    for pair, context in scenarios():
        psi, prefix = slrs_proposal_row(pair, context), slrs_prefix_row(pair, context)
        assert sum(psi) == 1, context
        tokens = pair.target_tokenizer.tokens
        prefix_free = not any(a != b and b.startswith(a) for a in tokens for b in tokens)
        if prefix_free:
            assert psi == prefix, context
        differs += psi != prefix
        cases += 1
    assert differs > 0, "the prefix probability never differed: the check cannot fail"
    return cases


def check_slrs_walk() -> int:
    """ψ = prefix probability minus the minimal extensions'; the walk without pruning is ψ; the
    pruned walk (ε = 1/8) bounds ψ and the mean acceptance Σ min(p, ψ)"""
    cases = pruned = 0
    for pair, context in scenarios():
        psi = slrs_proposal_row(pair, context)
        assert slrs_difference_row(pair, context) == psi, context
        vocab = StringVocabularies(pair.target_tokenizer.tokens, pair.draft_tokenizer.tokens)
        start = draft_context(pair, context)

        def rows(
            paths: Sequence[tuple[int, ...]],
            pair: StringPair = pair,
            start: tuple[int, ...] = start,
        ) -> list[tuple[Fraction, ...]]:
            return [pair.draft.probs((*start, *path)) for path in paths]

        assert slrs_proposal_bounds(vocab, rows, epsilon=0).lower == psi, context
        found = slrs_proposal_bounds(vocab, rows, epsilon=Fraction(1, 8))
        upper = slrs_upper_row(vocab, found)
        assert all(a <= b <= c for a, b, c in zip(found.lower, psi, upper, strict=True))
        target = pair.target.probs(context)
        low, high = slrs_acceptance_bounds(vocab, found, target)
        assert low <= sum(min(a, b) for a, b in zip(target, psi, strict=True)) <= high
        pruned += found.pruned_mass > 0
        cases += 1
    assert pruned > 0, "nothing was pruned: the bounds were never tested"
    return cases


def psi_model(pair: StringPair, order: int) -> ToyModel:
    """ψ as a toy model over the target's ids, one row per context of up to ``order`` tokens."""
    vocab = pair.target.vocab_size
    rows = []
    for code in itertools.product(range(vocab + 1), repeat=order):
        context = tuple(t for t in code if t < vocab)  # the start symbol pads on the left
        rows.append(slrs_proposal_row(pair, context))
    return ToyModel.from_rows(vocab, order, rows)


def check_slrs_lossless() -> int:
    """SLRS: the chain law completes to the target's; verify_tokens told ψ has that law"""
    cases = 0
    for pair, context in scenarios():
        for k in (1, 2):
            law = slrs_step_law(pair, context, k=k)
            assert string_distance(law, pair, context, k) == 0, (context, k)
            cases += 1
    for pair in quick(pairs(), 4):
        psi = psi_model(pair, order=2)
        for k in (1, 2):
            torch_law = block_law(specdec.verify_tokens, pair.target, psi, (), k)
            assert torch_law == slrs_step_law(pair, (), k=k), k
            completed = completion_law(torch_law, pair.target, (), k)
            assert completed == target_law(pair.target, (), k + 1), k
            cases += 1
    return cases


def check_zoo_distances() -> int:
    """STRING_ZOO: every lossy entry at a positive exact distance, every lossless one at 0"""
    found: dict[str, Fraction] = {}
    every = scenarios()
    for name, entry in STRING_ZOO.items():
        result = audit_string_entry(entry.law, every, k=ZOO_K)
        assert result.lossy == entry.lossy, (name, result)
        found[name] = result.distance
    lossy = ", ".join(f"{n} {float(d):.3f}" for n, d in found.items() if d > 0)
    print(f"  largest exact TV (k = {ZOO_K}, {len(every)} scenarios): {lossy}", file=sys.stderr)
    return len(found) * len(every)


CHECKS = [
    check_tokenizers,
    check_slem_lossless,
    check_slem_torch_rule,
    check_slem_torch_rule_discovered,
    check_slem_any_proposal,
    check_slrs_proposal_law,
    check_slrs_walk,
    check_slrs_lossless,
    check_zoo_distances,
]


def test_tokenizers() -> None:
    check_tokenizers()


def test_slem_lossless() -> None:
    check_slem_lossless()


def test_slem_torch_rule() -> None:
    check_slem_torch_rule()


def test_slem_torch_rule_discovered() -> None:
    check_slem_torch_rule_discovered()


def test_slem_any_proposal() -> None:
    check_slem_any_proposal()


def test_slrs_proposal_law() -> None:
    check_slrs_proposal_law()


def test_slrs_walk() -> None:
    check_slrs_walk()


def test_slrs_lossless() -> None:
    check_slrs_lossless()


def test_zoo_distances() -> None:
    check_zoo_distances()


if __name__ == "__main__":
    run_checks("claim 22", CHECKS)
