"""Claim 12 (heterogeneous vocabularies): a draft with another vocabulary, restricted to the
tokens it shares with the target and renormalised (uniform on them where it has no mass there),
is a draft law on the target's vocabulary like any other, so speculative sampling with it is
lossless; restricting the *target* as well is lossy whenever the target has mass off the
shared tokens.

Checked: ``specdec.exact.restricted_draft`` equals this script's own rational construction,
row for row; ``specdec.models.MappedDraft`` (``VocabularyMap.to_target_logits`` then
``warp_probs``) gives that rational restricted law on every context of seeded toy pairs with
random maps (permuted ids, draft-only tokens, target tokens the draft lacks, rows with no mass on
the shared tokens), within 1e-12 in float64; the exact block law of ``verify_tokens`` with that
restricted draft (``specdec.exact.block_law``) and the pure-Fraction recursion of claim 2 both
complete to the target's law, exactly; the restricted target's law differs from the target's
by an exact positive total variation in every case with mass off the shared tokens, and equals it
when every target token is shared. See ``proofs/theory.md``, claim 12.
"""

import itertools
import random
from fractions import Fraction

import torch
from _common import (
    assert_discovered_law,
    completion,
    quick,
    reference_block_law,
    run_checks,
    table_model,
    target_law,
)

import specdec
from specdec.exact import Law, block_law, completion_law, law_total_variation, restricted_draft
from specdec.models import MappedDraft, ToyLM, VocabularyMap, empty_context, extend
from specdec.models.toy import ToyModel, make_toy_model
from specdec.types import VerifyRule

ZERO = Fraction(0)
Row = tuple[Fraction, ...]
# (seed, target V, draft V, k): 48 cases, V in 2..5, k in 1..3
CASES = [(1200 + seed, 2 + seed % 4, 2 + (seed // 4) % 4, 1 + seed % 3) for seed in range(48)]
PREFIXES = ((), (0,), (1, 0))
TOLERANCE = 1e-12


def random_map(seed: int, target_vocab: int, draft_vocab: int) -> VocabularyMap:
    """A seeded map: a random shared subset of 1..min(V) tokens, in a random order."""
    rng = random.Random(seed)
    shared = rng.randint(1, min(target_vocab, draft_vocab))
    target_ids = rng.sample(range(target_vocab), shared)
    draft_ids = rng.sample(range(draft_vocab), shared)
    unknown = None if shared == target_vocab else rng.randrange(draft_vocab)
    return VocabularyMap(
        torch.tensor(draft_ids), torch.tensor(target_ids), draft_vocab, target_vocab, unknown
    )


def models_for(seed: int, target_vocab: int, draft_vocab: int) -> tuple[ToyModel, ToyModel]:
    """A target and an independent draft (zeros often: some rows miss the shared tokens)."""
    target = make_toy_model(target_vocab, seed=seed, order=2, denominator=12)
    draft = make_toy_model(draft_vocab, seed=seed + 1, order=2, denominator=12, zero_rate=0.5)
    return target, draft


def read_by_draft(sequence: list[int], vmap: VocabularyMap) -> list[int]:
    """Target ids as the draft reads them (rational twin of ``VocabularyMap.to_draft_ids``)."""
    read = dict(zip(vmap.target_ids.tolist(), vmap.draft_ids.tolist(), strict=True))
    unknown = vmap.draft_unknown_id  # None only when every target token is shared
    return [read[t] if t in read else int(unknown or 0) for t in sequence]


def restricted_row(row: Row, draft_ids: list[int], target_ids: list[int], vocab: int) -> Row:
    """The draft row restricted to the shared tokens, renormalised, on the target vocabulary."""
    mass = sum((row[d] for d in draft_ids), ZERO)
    out = [ZERO] * vocab
    for d, t in zip(draft_ids, target_ids, strict=True):
        out[t] = row[d] / mass if mass else Fraction(1, len(draft_ids))
    return tuple(out)


def restricted_model(model: ToyModel, vmap: VocabularyMap, reads_target_ids: bool) -> ToyModel:
    """The rational restricted law of ``model`` as a toy model on the target vocabulary.

    ``reads_target_ids``: the model reads target ids (the restricted *target*); otherwise it is
    the draft and reads each target token through the map (``draft_unknown_id`` if unshared).
    """
    vocab = vmap.target_vocab_size
    draft_ids, target_ids = vmap.draft_ids.tolist(), vmap.target_ids.tolist()
    rows = []
    for tail in itertools.product(range(vocab + 1), repeat=model.order):  # V is the start
        if reads_target_ids:
            row = model.probs(tail)
        else:  # the start symbol stays the start symbol
            start = model.vocab_size
            row = model.probs([start if t == vocab else read_by_draft([t], vmap)[0] for t in tail])
        ids = target_ids if reads_target_ids else draft_ids
        rows.append(restricted_row(row, ids, target_ids, vocab))
    return table_model(vocab, model.order, rows)


def check_library_restriction() -> int:
    """specdec.exact.restricted_draft == this script's rational restriction, row for row."""
    rows = 0
    for seed, target_vocab, draft_vocab, _ in CASES:
        _, draft = models_for(seed, target_vocab, draft_vocab)
        vmap = random_map(seed, target_vocab, draft_vocab)
        library = restricted_draft(draft, vmap)
        assert library.rows == restricted_model(draft, vmap, reads_target_ids=False).rows, seed
        rows += len(library.rows)
    return rows


def check_mapped_draft_rows() -> int:
    """MappedDraft then warp_probs == the rational restricted law, every context (float64)."""
    contexts = dead = 0
    for seed, target_vocab, draft_vocab, _ in CASES:
        _, draft = models_for(seed, target_vocab, draft_vocab)
        vmap = random_map(seed, target_vocab, draft_vocab)
        exact = restricted_model(draft, vmap, reads_target_ids=False)
        mapped = MappedDraft(ToyLM(draft), vmap)
        for length in range(1, draft.order + 1):
            sequences = torch.cartesian_prod(*[torch.arange(target_vocab)] * length)
            sequences = sequences.reshape(-1, length)
            logits, _ = extend(mapped, empty_context(sequences.shape[0]), sequences, 1)
            got = specdec.warp_probs(logits[:, -1])
            for sequence, row in zip(sequences.tolist(), got, strict=True):
                expected = torch.tensor([float(v) for v in exact.probs(sequence)], dtype=row.dtype)
                assert torch.allclose(row, expected, rtol=0, atol=TOLERANCE), (
                    seed,
                    sequence,
                )
                contexts += 1
                row_of_draft = draft.probs(read_by_draft(sequence, vmap))
                dead += sum(row_of_draft[d] for d in vmap.draft_ids.tolist()) == 0
    assert dead > 0, "no draft row without mass on the shared tokens: the edge case is untested"
    return contexts


def check_restricted_draft_is_lossless() -> int:
    """The restricted draft's block law (verify_tokens; claim-2 recursion) completes to p.

    Exactly: ``block_law`` of the torch rule, and the pure-Fraction recursion of claim 2."""
    cases = 0
    for seed, target_vocab, draft_vocab, k in CASES:
        target, draft = models_for(seed, target_vocab, draft_vocab)
        vmap = random_map(seed, target_vocab, draft_vocab)
        restricted = restricted_draft(draft, vmap)
        for prefix in PREFIXES:
            prefix = tuple(t % target_vocab for t in prefix)
            expected = target_law(target, prefix, k + 1)
            law: Law = block_law(specdec.verify_tokens, target, restricted, prefix, k)
            assert completion_law(law, target, prefix, k) == expected, (seed, prefix)
            reference = reference_block_law(target, restricted, prefix, k)
            assert reference == law, (seed, prefix)
            assert completion(reference, target, prefix, k + 1) == expected, (seed, prefix)
            cases += 1
    return cases


def check_restricting_the_target_is_lossy() -> int:
    """Restricting the target is lossy: exact TV > 0 iff the target has mass off the shared set.

    The distance is at least that mass; a complete map changes nothing."""
    cases = 0
    for seed, target_vocab, draft_vocab, k in CASES:
        target, _ = models_for(seed, target_vocab, draft_vocab)
        vmap = random_map(seed, target_vocab, draft_vocab)
        restricted = restricted_model(target, vmap, reads_target_ids=True)
        shared = set(vmap.target_ids.tolist())
        law, wrong = target_law(target, (), k + 1), target_law(restricted, (), k + 1)
        off_shared = sum((w for seq, w in law.items() if not set(seq) <= shared), ZERO)
        distance = law_total_variation(law, wrong)
        assert (distance > 0) == (off_shared > 0), (seed, distance, off_shared)
        assert distance >= off_shared, (seed, distance, off_shared)  # that mass is lost
        cases += 1
    complete = VocabularyMap(torch.arange(3), torch.arange(3), 4, 3)
    target = make_toy_model(3, seed=1250, denominator=12)
    same = restricted_model(target, complete, reads_target_ids=True)
    assert target_law(same, (), 3) == target_law(target, (), 3)
    return cases + 1


DISCOVERED_CASES = CASES[:8]


def check_restricted_draft_discovered_law(rule: VerifyRule = specdec.verify_tokens) -> int:
    """verify_tokens, restricted draft, law from its own decisions (claim 14) == recursion

    Within 2^-40, and the completed law the target's (8 cases, prefix (0,)).
    """
    cases = quick(DISCOVERED_CASES, 3)
    for seed, target_vocab, draft_vocab, k in cases:
        target, draft = models_for(seed, target_vocab, draft_vocab)
        restricted = restricted_draft(draft, random_map(seed, target_vocab, draft_vocab))
        reference = reference_block_law(target, restricted, (0,), k)
        assert_discovered_law(rule, target, restricted, (0,), k, reference)
    return len(cases)


CHECKS = [
    check_library_restriction,
    check_mapped_draft_rows,
    check_restricted_draft_is_lossless,
    check_restricting_the_target_is_lossy,
    check_restricted_draft_discovered_law,
]


def test_library_restriction() -> None:
    check_library_restriction()


def test_mapped_draft_rows() -> None:
    check_mapped_draft_rows()


def test_restricted_draft_is_lossless() -> None:
    check_restricted_draft_is_lossless()


def test_restricting_the_target_is_lossy() -> None:
    check_restricting_the_target_is_lossy()


def test_restricted_draft_discovered_law() -> None:
    check_restricted_draft_discovered_law()


if __name__ == "__main__":
    run_checks("claim 12", CHECKS)
