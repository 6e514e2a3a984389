r"""Exact laws of the string-level rules on toy pairs with two tokenizers (claim 22).

A ``StringPair`` is a target toy model over the target tokenizer's ids and a draft toy model over
the draft tokenizer's ids that reads the *draft's* canonical tokenization of the context's text.
Every law here is a ``Law`` (emitted block of target ids -> ``Fraction``), so losslessness is
``completion_law(law, target, context, k) == target_law(target, context, k + 1)``.

* **SLEM** (string-level exact match): the draft writes ``m`` tokens, their text is re-tokenized
  into a proposal ``x`` of ``1 .. k`` target ids, the target samples ``y_i`` at each position and
  the block stops at the first mismatch (``slem_step_law``). Lossless for every proposal.
* **SLRS** (string-level rejection sampling): the draft writes tokens from the context's text
  until its new text ``w`` has at least ``L`` characters (``L`` the longest target token); the
  proposed target token is the longest target token prefixing ``w``. Its law is

  .. math::
      \psi(t \mid c) = \sum_{d\,:\,\mathrm{lt}(\mathrm{decode}_D(d)) = t} \; \prod_j
      q(d_j \mid r(c)\, d_{<j})

  summed over *every* draft token sequence (every tokenization) whose text starts with ``t`` and
  with no longer target token (``slrs_proposal_row``). Rejection sampling with
  ``min(1, p(t)/ψ(t))`` and residual ``norm(max(0, p − ψ))``, chained over ``k`` positions (the
  draft restarts at each accepted token's end), is claim 1 and 2 with ``q = ψ``: lossless. When no
  target token is a prefix of another, ``ψ(t)`` is the probability that the draft's text starts
  with ``t``; otherwise that probability over-counts and is not a law (``slrs_prefix_row``).

References:
    N. Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
    for Heterogeneous Vocabularies", ICML 2025; ``proofs/theory.md``, claim 22.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch
from torch import Tensor

from specdec._checks import check_instance, check_positive_int
from specdec._cuts import bound
from specdec.exact import Law, cdf_steps, completion_law, law_total_variation, target_law
from specdec.models.tokenizers import ToyTokenizer
from specdec.models.toy import ToyModel, make_toy_model
from specdec.multi_law import cell_law
from specdec.types import Verification
from specdec.verify.strings import pad_proposals, retokenize, verify_string_exact_match

__all__ = [
    "ProposalFn",
    "RowFn",
    "StringPair",
    "StringRule",
    "canonical_proposal",
    "draft_context",
    "exact_match_block_law",
    "make_string_pair",
    "rejection_chain_law",
    "slem_proposal_law",
    "slem_step_law",
    "slem_torch_law",
    "slrs_difference_row",
    "slrs_exact_string_row",
    "slrs_one_tokenization_row",
    "slrs_prefix_row",
    "slrs_proposal_row",
    "slrs_short_proposal_row",
    "slrs_step_law",
    "string_distance",
]

Row = tuple[Fraction, ...]
RowFn = Callable[[tuple[int, ...]], Row]
"""A row of the target vocabulary as a function of the target context."""
ProposalFn = Callable[["StringPair", tuple[int, ...], int], tuple[int, ...]]
"""``(pair, draft ids, k) -> 1..k target ids``: how a draft text becomes a proposal."""
ZERO = Fraction(0)


@dataclass(frozen=True)
class StringPair:
    """A target and a draft with their own tokenizers over one alphabet.

    Attributes:
        target: next-token law over ``target_tokenizer``'s ids, reading target ids.
        draft: next-token law over ``draft_tokenizer``'s ids, reading the draft's canonical
            tokenization of the context's text (``draft_context``).
        target_tokenizer: the target's vocabulary.
        draft_tokenizer: the draft's vocabulary (the same single characters).

    Raises:
        TypeError: a field of the wrong type.
        ValueError: a model whose vocabulary is not its tokenizer's, or two alphabets.
    """

    target: ToyModel
    draft: ToyModel
    target_tokenizer: ToyTokenizer
    draft_tokenizer: ToyTokenizer

    def __post_init__(self) -> None:
        for name, value, kind in (
            ("target", self.target, ToyModel),
            ("draft", self.draft, ToyModel),
            ("target_tokenizer", self.target_tokenizer, ToyTokenizer),
            ("draft_tokenizer", self.draft_tokenizer, ToyTokenizer),
        ):
            check_instance(name, value, kind, kind.__name__)
        for side, model, tokenizer in (
            ("target", self.target, self.target_tokenizer),
            ("draft", self.draft, self.draft_tokenizer),
        ):
            if model.vocab_size != tokenizer.vocab_size:
                raise ValueError(
                    f"The {side} model has V={model.vocab_size} but its tokenizer has "
                    f"{tokenizer.vocab_size} tokens."
                )
        if self.target_tokenizer.alphabet != self.draft_tokenizer.alphabet:
            raise ValueError(
                f"The tokenizers must share one alphabet, got {self.target_tokenizer.alphabet} "
                f"and {self.draft_tokenizer.alphabet}."
            )


def make_string_pair(
    seed: int, target_tokens: Sequence[str], draft_tokens: Sequence[str], *, zero_rate: float = 0.3
) -> StringPair:
    """A seeded ``StringPair`` of order-2 toy models (denominator 12) on two vocabularies.

    Example:
        >>> pair = make_string_pair(0, ("a", "b", "ab"), ("a", "b", "ba"))
        >>> pair.target.vocab_size, pair.draft_tokenizer.decode((2, 0))
        (3, 'baa')
    """
    target_tokenizer, draft_tokenizer = (
        ToyTokenizer(tuple(target_tokens)),
        ToyTokenizer(tuple(draft_tokens)),
    )

    def model(vocab_size: int, model_seed: int) -> ToyModel:
        return make_toy_model(
            vocab_size, seed=model_seed, denominator=12, zero_rate=zero_rate, one_hot_rate=0.05
        )

    return StringPair(
        target=model(target_tokenizer.vocab_size, seed),
        draft=model(draft_tokenizer.vocab_size, seed + 7919),
        target_tokenizer=target_tokenizer,
        draft_tokenizer=draft_tokenizer,
    )


def draft_context(pair: StringPair, context: Sequence[int]) -> tuple[int, ...]:
    """The draft's reading of a target context: its canonical tokenization of the text."""
    return pair.draft_tokenizer.encode(pair.target_tokenizer.decode(context))


def _draft_blocks(
    pair: StringPair, context: Sequence[int], m: int
) -> list[tuple[tuple[int, ...], Fraction]]:
    """The exact law of the draft's next ``m`` tokens after the context's text."""
    return list(target_law(pair.draft, draft_context(pair, context), m).items())


def canonical_proposal(pair: StringPair, draft_ids: tuple[int, ...], k: int) -> tuple[int, ...]:
    """``retokenize``: the draft's text, canonically re-tokenized, cut to ``k``."""
    return retokenize(draft_ids, pair.draft_tokenizer, pair.target_tokenizer, max_tokens=k)


def slem_proposal_law(
    pair: StringPair,
    context: Sequence[int],
    *,
    m: int,
    k: int,
    proposal: ProposalFn = canonical_proposal,
) -> Law:
    """The exact law of SLEM's proposal: ``m`` draft tokens re-tokenized to ``1..k`` target ids."""
    check_positive_int("m", m)
    check_positive_int("k", k)
    law: Law = {}
    for draft_ids, weight in _draft_blocks(pair, context, m):
        x = proposal(pair, draft_ids, k)
        law[x] = law.get(x, ZERO) + weight
    return law


def exact_match_block_law(target: ToyModel, context: Sequence[int], proposal: Sequence[int]) -> Law:
    r"""The emitted block of exact matching a fixed proposal, in Fractions (claim 7's walk).

    .. math::
        P(S = x_{1..j}\, y) = \prod_{i \le j} p_i(x_i) \cdot p_{j+1}(y)\,[j = n \text{ or }
        y \ne x_{j+1}]
    """
    law: Law = {}

    def walk(emitted: tuple[int, ...], weight: Fraction) -> None:
        i = len(emitted)
        for token, prob in enumerate(target.probs((*context, *emitted))):
            if prob == 0:
                continue
            if i < len(proposal) and token == proposal[i]:
                walk((*emitted, token), weight * prob)
            else:
                block = (*emitted, token)
                law[block] = law.get(block, ZERO) + weight * prob

    walk((), Fraction(1))
    return law


def slem_step_law(
    pair: StringPair,
    context: Sequence[int],
    *,
    m: int,
    k: int,
    proposal: ProposalFn = canonical_proposal,
) -> Law:
    """The exact law of one SLEM step's emitted block (claim 22)."""
    law: Law = {}
    for x, weight in slem_proposal_law(pair, context, m=m, k=k, proposal=proposal).items():
        for block, prob in exact_match_block_law(pair.target, context, x).items():
            law[block] = law.get(block, ZERO) + weight * prob
    return law


StringRule = Callable[[Tensor, Tensor, Tensor, Tensor], Verification]
"""``verify_string_exact_match``'s signature (tokens, lengths, target rows, uniforms)."""


def slem_torch_law(
    pair: StringPair, context: Sequence[int], *, m: int, k: int, rule: StringRule | None = None
) -> Law:
    """The exact law of a torch string-level exact-match ``rule`` (``verify_string_exact_match``
    by default) on SLEM's proposals, cell by cell: for a proposal ``x`` of ``n`` tokens,
    ``u_1 .. u_{n+1}`` are cut at their rows' inverse-CDF steps (``u_{n+2} ..`` at none), and
    ``specdec.multi_law.cell_law`` runs ``rule`` at every cell's centre, checking its corners
    beside the cuts: a rule deciding elsewhere (``u`` scaled by 0.999) raises ``ValueError``
    naming the proposal and the cut, instead of getting this law."""
    law: Law = {}
    target = pair.target
    uniform_row = [1.0 / target.vocab_size] * target.vocab_size
    for x, weight in slem_proposal_law(pair, context, m=m, k=k).items():
        rows = [target.probs((*context, *x[:i])) for i in range(len(x) + 1)]
        float_rows = [[float(v) for v in row] for row in rows] + [uniform_row] * (k - len(x))
        probs = torch.tensor(float_rows, dtype=torch.float64)  # [k+1, V]
        block, lengths = pad_proposals([x], k)  # [1, k], [1]
        evaluate = bound(rule or verify_string_exact_match, block[0], lengths[0], probs)
        cuts = [cdf_steps(row) for row in rows] + [[] for _ in range(k - len(x))]
        for output, prob in cell_law(evaluate, cuts, where=f"proposal {x}").items():
            emitted = tuple(t for t in output if t >= 0)
            law[emitted] = law.get(emitted, ZERO) + weight * prob
    return law


def _continuations(
    pair: StringPair, context: Sequence[int], need: int | None = None
) -> list[tuple[tuple[int, ...], Fraction]]:
    """Every draft token sequence from the context's text until its new text has at least
    ``need`` characters (default ``L``, the longest target token), with its probability."""
    need = pair.target_tokenizer.max_length if need is None else need
    start = draft_context(pair, context)
    out: list[tuple[tuple[int, ...], Fraction]] = []

    def walk(ids: tuple[int, ...], weight: Fraction) -> None:
        if len(pair.draft_tokenizer.decode(ids)) >= need:
            out.append((ids, weight))
            return
        for token, prob in enumerate(pair.draft.probs((*start, *ids))):
            if prob:
                walk((*ids, token), weight * prob)

    walk((), Fraction(1))
    return out


def slrs_proposal_row(pair: StringPair, context: Sequence[int]) -> Row:
    r"""``ψ(· | c)``: the law of SLRS's proposed target token (a law: sums to 1).

    .. math::
        \psi(t \mid c) = \sum_{d\,:\,\mathrm{lt}(\mathrm{decode}_D(d)) = t} q(d \mid r(c))
    """
    row = [ZERO] * pair.target.vocab_size
    for ids, weight in _continuations(pair, context):
        row[pair.target_tokenizer.longest_prefix(pair.draft_tokenizer.decode(ids))] += weight
    return tuple(row)


def slrs_short_proposal_row(pair: StringPair, context: Sequence[int]) -> Row:
    """The law of ``lt(w)`` when the draft stops after one token (``w`` may be shorter than
    ``L``: its last target token is cut short), the proposal of an implementation that does not
    look ahead."""
    row = [ZERO] * pair.target.vocab_size
    for ids, weight in _continuations(pair, context, need=1):
        row[pair.target_tokenizer.longest_prefix(pair.draft_tokenizer.decode(ids))] += weight
    return tuple(row)


def slrs_prefix_row(pair: StringPair, context: Sequence[int]) -> Row:
    """The probability that the draft's text starts with each target token (``ψ`` when no
    target token prefixes another; over 1 in sum otherwise)."""
    tokens = pair.target_tokenizer.tokens
    row = [ZERO] * len(tokens)
    for ids, weight in _continuations(pair, context):
        text = pair.draft_tokenizer.decode(ids)
        for t, token in enumerate(tokens):
            if text.startswith(token):
                row[t] += weight
    return tuple(row)


def slrs_difference_row(pair: StringPair, context: Sequence[int]) -> Row:
    r"""``ψ`` from the prefix probabilities: subtract those of the minimal extensions.

    .. math::
        \psi(t \mid c) = P(w \text{ starts with } t) - \sum_{u \in M(t)}
        P(w \text{ starts with } u)

    ``M(t)``: the target tokens strictly extending ``t`` with no target token strictly between.
    Two of them never both prefix ``w`` (the shorter would lie between ``t`` and the longer), and
    a longer target token prefixes ``w`` iff one of them does, so ``lt(w) = t`` iff ``w``
    starts with ``t`` and with none of them (claim 22; equals ``slrs_proposal_row``).
    """
    tokens = pair.target_tokenizer.tokens
    prefix = slrs_prefix_row(pair, context)

    def minimal(token: str, longer: str) -> bool:
        return not any(
            len(token) < len(mid) < len(longer) and longer.startswith(mid) for mid in tokens
        )

    return tuple(
        prefix[t]
        - sum(
            (
                prefix[u]
                for u, longer in enumerate(tokens)
                if len(longer) > len(token) and longer.startswith(token) and minimal(token, longer)
            ),
            ZERO,
        )
        for t, token in enumerate(tokens)
    )


def slrs_exact_string_row(pair: StringPair, context: Sequence[int]) -> Row:
    """The probability that the draft writes exactly ``t``, a token boundary at its end: the
    sum over the draft's tokenizations of ``t`` alone (drafts straddling ``t``'s end are lost)."""
    tokens = pair.target_tokenizer.tokens
    row = [ZERO] * len(tokens)
    start = draft_context(pair, context)
    for t, token in enumerate(tokens):

        def walk(
            ids: tuple[int, ...], weight: Fraction, text: str, target: str = token
        ) -> Fraction:
            if text == target:
                return weight
            total = ZERO
            for d, prob in enumerate(pair.draft.probs((*start, *ids))):
                piece = pair.draft_tokenizer.tokens[d]
                if prob and target.startswith(text + piece):
                    total += walk((*ids, d), weight * prob, text + piece)
            return total

        row[t] = walk((), Fraction(1), "")
    return tuple(row)


def slrs_one_tokenization_row(pair: StringPair, context: Sequence[int]) -> Row:
    """The draft's probability of ``t`` along its canonical tokenization of ``t`` only."""
    start = draft_context(pair, context)
    row = []
    for token in pair.target_tokenizer.tokens:
        weight, ids = Fraction(1), tuple[int, ...]()
        for d in pair.draft_tokenizer.encode(token):
            weight *= pair.draft.probs((*start, *ids))[d]
            ids = (*ids, d)
        row.append(weight)
    return tuple(row)


def rejection_chain_law(
    target_row: RowFn, proposal_row: RowFn, told_row: RowFn, context: Sequence[int], k: int
) -> Law:
    r"""Token-level rejection sampling of ``k`` proposals ``x_i ~ proposal_row``, each accepted
    with ``min(1, p(x_i)/ψ'(x_i))`` for the *told* row ``ψ'``, the first rejection corrected from
    ``norm(max(0, p − ψ'))`` (``p`` where that is 0), else the bonus ``p_{k+1}`` (claim 2's
    recursion; a told row that is 0 at a proposal accepts it). Lossless when told = proposal."""
    check_positive_int("k", k)
    law: Law = {}

    def add(block: tuple[int, ...], prob: Fraction) -> None:
        law[block] = law.get(block, ZERO) + prob

    def walk(emitted: tuple[int, ...], weight: Fraction) -> None:
        here = (*context, *emitted)
        target = target_row(here)
        if len(emitted) == k:
            for y, prob in enumerate(target):
                if prob:
                    add((*emitted, y), weight * prob)
            return
        sampled, told = proposal_row(here), told_row(here)
        rejected = ZERO
        for x, prob in enumerate(sampled):
            if prob == 0:
                continue
            accept = min(Fraction(1), target[x] / told[x]) if told[x] > 0 else Fraction(1)
            if accept:
                walk((*emitted, x), weight * prob * accept)
            rejected += prob * (1 - accept)
        excess = [max(ZERO, a - b) for a, b in zip(target, told, strict=True)]
        mass = sum(excess, ZERO)
        residual = [e / mass for e in excess] if mass else list(target)
        for y, prob in enumerate(residual):
            if prob and rejected:
                add((*emitted, y), weight * rejected * prob)

    walk((), Fraction(1))
    return law


def slrs_step_law(
    pair: StringPair,
    context: Sequence[int],
    *,
    k: int,
    told: Callable[[StringPair, Sequence[int]], Row] = slrs_proposal_row,
    proposal: Callable[[StringPair, Sequence[int]], Row] = slrs_proposal_row,
) -> Law:
    """The exact law of ``k`` chained SLRS positions drawn from ``proposal``; ``told``: the row
    the verifier is given (lossless when it is the proposal's own law; the others are
    mistakes)."""
    return rejection_chain_law(
        pair.target.probs,
        lambda c: proposal(pair, c),
        lambda c: told(pair, c),
        context,
        k,
    )


def string_distance(law: Law, pair: StringPair, context: Sequence[int], k: int) -> Fraction:
    """The exact total variation of a step's completed law from the target's ``k + 1`` tokens
    (0 iff the step is lossless at this context)."""
    completed = completion_law(law, pair.target, context, k)
    return law_total_variation(completed, target_law(pair.target, context, k + 1))
