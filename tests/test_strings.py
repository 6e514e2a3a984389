"""String-level rules (claim 22): toy tokenizers, SLEM's torch rule, the exact laws, the zoo.

The exhaustive exact checks are ``proofs/claim_22_string_level.py``; here: hand-computed
examples, validation messages, batch = rows, and the string audit on a small scenario set, each
paired with a known-wrong control it must reject.
"""

from fractions import Fraction

import pytest
import torch

from specdec.models.tokenizers import ToyTokenizer
from specdec.string_law import (
    exact_match_block_law,
    make_string_pair,
    slem_step_law,
    slem_torch_law,
    slrs_prefix_row,
    slrs_proposal_row,
    slrs_step_law,
    string_distance,
)
from specdec.testing.zoo import STRING_ZOO, audit_string_entry
from specdec.verify.strings import pad_proposals, retokenize, verify_string_exact_match

TARGET_TOKENS = ("a", "b", "ab", "ba")
DRAFT_TOKENS = ("a", "b", "ab", "bb", "bab")


def test_tokenizer_encodes_by_longest_match() -> None:
    tokenizer = ToyTokenizer(TARGET_TOKENS)
    assert tokenizer.encode("abba") == (2, 3)  # ab, ba
    assert tokenizer.encode("aab") == (0, 2)
    assert tokenizer.decode((0, 1, 1, 0)) == "abba"
    assert not tokenizer.is_canonical((0, 1, 1, 0)) and tokenizer.is_canonical((2, 3))
    assert tokenizer.longest_prefix("bab") == 3 and tokenizer.max_length == 2


@pytest.mark.parametrize(
    ("tokens", "error", "match"),
    [
        (["a"], TypeError, "tuple"),
        (("a", ""), ValueError, "non-empty"),
        (("a", "a"), ValueError, "distinct"),
        (("a", "ab"), ValueError, r"\['b'\]"),
    ],
)
def test_tokenizer_refuses_bad_vocabularies(tokens: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ToyTokenizer(tokens)  # type: ignore[arg-type]


def test_retokenize_keeps_the_partial_last_token_and_cuts_to_k() -> None:
    draft, target = ToyTokenizer(DRAFT_TOKENS), ToyTokenizer(TARGET_TOKENS)
    assert retokenize((4, 0), draft, target, max_tokens=3) == (3, 3)  # "baba" = ba, ba
    assert retokenize((2, 3), draft, target, max_tokens=3) == (2, 1, 1)  # "abbb" = ab, b, b
    assert retokenize((2, 3), draft, target, max_tokens=1) == (2,)
    with pytest.raises(ValueError, match="at least one"):
        retokenize((), draft, target, max_tokens=2)


def test_slem_rule_hand_example_and_lengths() -> None:
    rows = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75], [1.0, 0.0, 0.0]], dtype=torch.float64)
    uniforms = torch.tensor([0.1, 0.5, 0.3], dtype=torch.float64)  # y = 0, 2, 0
    block, lengths = pad_proposals([(0, 2), (0,), (1, 2)], 2)
    out = verify_string_exact_match(block, lengths, rows.expand(3, 3, 3), uniforms.expand(3, 3))
    assert out.tokens.tolist() == [[0, 2, 0], [0, 2, -1], [0, -1, -1]]
    assert out.num_accepted.tolist() == [2, 1, 0]
    # a batch equals its rows run alone
    for row in range(3):
        alone = verify_string_exact_match(
            block[row : row + 1], lengths[row : row + 1], rows[None], uniforms[None]
        )
        assert alone.tokens[0].tolist() == out.tokens[row].tolist()


def test_slem_rule_validates_lengths() -> None:
    rows = torch.full((1, 3, 2), 0.5, dtype=torch.float64)
    uniforms = torch.full((1, 3), 0.5, dtype=torch.float64)
    block = torch.zeros((1, 2), dtype=torch.int64)
    with pytest.raises(ValueError, match="lengths"):
        verify_string_exact_match(block, torch.tensor([0]), rows, uniforms)
    with pytest.raises(ValueError, match="lengths"):
        verify_string_exact_match(block, torch.tensor([3]), rows, uniforms)
    with pytest.raises(ValueError, match=r"1\.\.2 tokens"):
        pad_proposals([(0, 1, 0)], 2)


def test_slem_laws_lossless_and_torch_rule_matches() -> None:
    pair = make_string_pair(5, TARGET_TOKENS, DRAFT_TOKENS)
    for context in ((), (2,)):
        law = slem_step_law(pair, context, m=2, k=2)
        assert sum(law.values()) == 1
        assert string_distance(law, pair, context, 2) == 0
        assert slem_torch_law(pair, context, m=2, k=2) == law


def test_exact_match_block_law_by_hand() -> None:
    pair = make_string_pair(5, TARGET_TOKENS, DRAFT_TOKENS)
    row = pair.target.probs(())
    law = exact_match_block_law(pair.target, (), (1,))
    # y_1 = 1 continues to the bonus; any other y_1 stops the block
    assert {b: w for b, w in law.items() if len(b) == 1} == {
        (y,): row[y] for y in range(4) if y != 1 and row[y]
    }
    assert sum(w for b, w in law.items() if len(b) == 2) == row[1]


def test_slrs_psi_is_a_law_and_the_prefix_probability_overcounts() -> None:
    pair = make_string_pair(5, TARGET_TOKENS, DRAFT_TOKENS)
    psi, prefix = slrs_proposal_row(pair, ()), slrs_prefix_row(pair, ())
    assert sum(psi) == 1 and sum(prefix) > 1  # "a" prefixes "ab": counted twice
    assert string_distance(slrs_step_law(pair, (), k=2), pair, (), 2) == 0


def test_string_audit_kills_every_lossy_entry_and_passes_the_controls() -> None:
    pairs = [
        make_string_pair(seed, TARGET_TOKENS, DRAFT_TOKENS) for seed in (2300, 2301, 2302, 2303)
    ]
    pairs += [make_string_pair(2300, ("a", "b", "ab", "aab"), ("a", "b", "ba", "aa"))]
    scenarios = [(pair, context) for pair in pairs for context in ((), (0,), (2,))]
    for name, entry in STRING_ZOO.items():
        result = audit_string_entry(entry.law, scenarios, k=2, stop_at_first=True)
        assert result.lossy == entry.lossy, name
        assert (result.distance > 0) == entry.lossy and result.distance <= 1, name
    with pytest.raises(ValueError, match="scenario"):
        audit_string_entry(STRING_ZOO["slem"].law, [], k=2)


def test_string_distance_detects_a_known_wrong_law() -> None:
    pair = make_string_pair(5, TARGET_TOKENS, DRAFT_TOKENS)
    law = slem_step_law(pair, (), m=1, k=1)
    first, second = sorted((b for b in law if len(b) == 2), key=law.__getitem__)[-2:]
    shifted = {**law, first: law[first] - Fraction(1, 100), second: law[second] + Fraction(1, 100)}
    assert law[first] >= Fraction(1, 100)
    assert string_distance(shifted, pair, (), 1) == Fraction(1, 100)
