r"""String-level steps (a draft with another tokenizer): lossless controls and known mistakes.

Each entry is the exact law of one step, ``law(pair, context, k) -> Law`` on a ``StringPair``
(``specdec.string_law``), so the string audit (``audit_string_entry``) judges it exactly: the
completed law against the target's, at every scenario, ``LOSSY`` at the first positive distance.
Their argument list is not ``VerifyRule``'s (a proposal has a ragged number of target tokens
and comes from text, not from rows on the target's vocabulary), so they are a registry of their
own, like ``MULTI_ZOO``; ``specdec audit`` does not take them (``proofs/theory.md``, claim 22).

Mistakes reproduced (the likely ones of an implementation of Timor et al. 2025):

* ``slem_context_retokenized``: the context's text and the draft's text re-tokenized *together*,
  the target scored at that re-tokenized context (its last token can merge with the draft's
  first characters): the rows are not the emitted context's.
* ``slem_string_prefix_accept``: a target sample is accepted when its *text* prefixes the rest of
  the draft text, but the next row is still the one scored along the proposal's tokens.
* ``slem_greedy``: a draft token accepted when it is the target's argmax, under sampling.
* ``slrs_one_tokenization``: ``ψ(t)`` from the draft's canonical tokenization of ``t`` only.
* ``slrs_prefix_probability``: ``ψ(t)`` = P(draft text starts with ``t``): over-counts where a
  target token prefixes another.
* ``slrs_exact_string``: ``ψ(t)`` = P(draft writes exactly ``t``), summed over its
  tokenizations of ``t`` but losing the drafts whose last token straddles ``t``'s end.
* ``slrs_short_lookahead``: the proposal taken from the draft's first token alone (its text
  may be shorter than the longest target token: the partial last token), told ``ψ``.

Lossless controls: ``slem``, ``slrs`` (the references), ``slem_drop_partial_last`` (the last
re-tokenized token dropped) and ``slem_char_level`` (a non-canonical, one-character-per-token
re-tokenization): both only waste acceptance (exact match is lossless for any proposal).

Why ``audit_string_entry`` stands apart from the audit (``specdec.testing.audit``: one
``Subject``, one ``AuditOptions``, one ``AuditReport``): it judges no user code. An audit calls
a function on inputs it draws or enumerates (rows, uniforms, generators) and learns its law
from what comes back; an entry here *is* an exact law, written by specdec to reproduce one
mistake, so nothing is called, drawn or enumerated, and no option of the audit applies (no
error rates, seed, power, workers, coverage, dtype). Its result is a comparison of two exact
laws over ``(pair, context)`` scenarios, the zoo's check for claim 22's proof
(``proofs/claim_22_string_level.py``), as ``specdec.discover.exact_verdict`` is for one law.
Forcing it into an ``AuditReport`` would invent a form, a level and a function name that mean
nothing here and print rates that were never used. It joins the frame when an engine's
string-level step becomes a ``Subject`` form (text and two tokenizers in, target ids out): that
form's law would be discovered and judged by the exact engine like any rule's, and this
comparison would be its decision.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from specdec._checks import check_positive_int
from specdec.exact import Law, target_law
from specdec.models.toy import ToyModel
from specdec.string_law import (
    StringPair,
    canonical_proposal,
    exact_match_block_law,
    slem_step_law,
    slrs_exact_string_row,
    slrs_one_tokenization_row,
    slrs_prefix_row,
    slrs_short_proposal_row,
    slrs_step_law,
    string_distance,
)

__all__ = [
    "SLEM_DRAFT_TOKENS",
    "STRING_ZOO",
    "StringAuditResult",
    "StringEntry",
    "audit_string_entry",
]

SLEM_DRAFT_TOKENS = 2
"""``m``: the draft tokens each SLEM entry writes before re-tokenizing."""
ZERO = Fraction(0)
StepLaw = Callable[[StringPair, tuple[int, ...], int], Law]


@dataclass(frozen=True)
class StringEntry:
    """One string-level step: its exact law, which rule it implements, and the verdict due.

    Attributes:
        name: the entry's name.
        rule: ``"slem"`` or ``"slrs"``.
        lossy: whether the audit must call it lossy.
        suboptimal: lossless but accepting less than the reference.
        law: ``(pair, context, k) -> Law`` of the emitted block of target ids.
    """

    name: str
    rule: Literal["slem", "slrs"]
    lossy: bool
    suboptimal: bool
    law: StepLaw


def _slem(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    return slem_step_law(pair, context, m=SLEM_DRAFT_TOKENS, k=k)


def _drop_partial(pair: StringPair, draft_ids: tuple[int, ...], k: int) -> tuple[int, ...]:
    x = canonical_proposal(pair, draft_ids, k + 1)
    return x[:-1][:k] if len(x) > 1 else x


def _char_level(pair: StringPair, draft_ids: tuple[int, ...], k: int) -> tuple[int, ...]:
    text = pair.draft_tokenizer.decode(draft_ids)
    return tuple(pair.target_tokenizer.tokens.index(c) for c in text)[:k]


def _slem_drop_partial_last(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    return slem_step_law(pair, context, m=SLEM_DRAFT_TOKENS, k=k, proposal=_drop_partial)


def _slem_char_level(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    return slem_step_law(pair, context, m=SLEM_DRAFT_TOKENS, k=k, proposal=_char_level)


def _add(law: Law, part: Law, weight: Fraction) -> None:
    for block, prob in part.items():
        law[block] = law.get(block, ZERO) + weight * prob


def _draft_texts(pair: StringPair, context: tuple[int, ...]) -> list[tuple[str, Fraction]]:
    start = pair.draft_tokenizer.encode(pair.target_tokenizer.decode(context))
    law = target_law(pair.draft, start, SLEM_DRAFT_TOKENS)
    return [(pair.draft_tokenizer.decode(ids), w) for ids, w in law.items()]


def _slem_context_retokenized(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    law: Law = {}
    for text, weight in _draft_texts(pair, context):
        whole = pair.target_tokenizer.encode(pair.target_tokenizer.decode(context) + text)
        scored_at = whole[: len(context)]  # not the emitted context when a token merged
        proposal = whole[len(context) : len(context) + k]
        _add(law, exact_match_block_law(pair.target, scored_at, proposal), weight)
    return law


def _prefix_accept_law(
    target: ToyModel, context: tuple[int, ...], proposal: Sequence[int], tokens: Sequence[str]
) -> Law:
    law: Law = {}
    n = len(proposal)

    def walk(emitted: tuple[int, ...], i: int, rest: str, weight: Fraction) -> None:
        row = target.probs((*context, *proposal[:i]))  # scored along the proposal's tokens
        for y, prob in enumerate(row):
            if prob == 0:
                continue
            if i < n and rest.startswith(tokens[y]):
                walk((*emitted, y), i + 1, rest[len(tokens[y]) :], weight * prob)
            else:
                block = (*emitted, y)
                law[block] = law.get(block, ZERO) + weight * prob

    walk((), 0, "".join(tokens[t] for t in proposal), Fraction(1))
    return law


def _slem_string_prefix_accept(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    law: Law = {}
    for text, weight in _draft_texts(pair, context):
        proposal = pair.target_tokenizer.encode(text)[:k]
        tokens = pair.target_tokenizer.tokens
        _add(law, _prefix_accept_law(pair.target, context, proposal, tokens), weight)
    return law


def _greedy_law(target: ToyModel, context: tuple[int, ...], proposal: Sequence[int]) -> Law:
    law: Law = {}

    def walk(emitted: tuple[int, ...], weight: Fraction) -> None:
        i = len(emitted)
        row = target.probs((*context, *emitted))
        if i < len(proposal) and proposal[i] == max(range(len(row)), key=lambda t: (row[t], -t)):
            walk((*emitted, proposal[i]), weight)  # the argmax accepted outright
            return
        for y, prob in enumerate(row):
            if prob:
                law[(*emitted, y)] = law.get((*emitted, y), ZERO) + weight * prob

    walk((), Fraction(1))
    return law


def _slem_greedy(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    law: Law = {}
    for text, weight in _draft_texts(pair, context):
        _add(law, _greedy_law(pair.target, context, pair.target_tokenizer.encode(text)[:k]), weight)
    return law


def _slrs(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    return slrs_step_law(pair, context, k=k)


def _slrs_told(
    told: Callable[[StringPair, Sequence[int]], tuple[Fraction, ...]],
) -> StepLaw:
    def law(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
        return slrs_step_law(pair, context, k=k, told=told)

    return law


def _slrs_short_lookahead(pair: StringPair, context: tuple[int, ...], k: int) -> Law:
    return slrs_step_law(pair, context, k=k, proposal=slrs_short_proposal_row)


STRING_ZOO: dict[str, StringEntry] = {
    entry.name: entry
    for entry in (
        StringEntry("slem", "slem", False, False, _slem),
        StringEntry("slem_drop_partial_last", "slem", False, True, _slem_drop_partial_last),
        StringEntry("slem_char_level", "slem", False, True, _slem_char_level),
        StringEntry("slem_context_retokenized", "slem", True, False, _slem_context_retokenized),
        StringEntry("slem_string_prefix_accept", "slem", True, False, _slem_string_prefix_accept),
        StringEntry("slem_greedy", "slem", True, False, _slem_greedy),
        StringEntry("slrs", "slrs", False, False, _slrs),
        StringEntry(
            "slrs_one_tokenization", "slrs", True, False, _slrs_told(slrs_one_tokenization_row)
        ),
        StringEntry("slrs_prefix_probability", "slrs", True, False, _slrs_told(slrs_prefix_row)),
        StringEntry("slrs_exact_string", "slrs", True, False, _slrs_told(slrs_exact_string_row)),
        StringEntry("slrs_short_lookahead", "slrs", True, False, _slrs_short_lookahead),
    )
}
"""The string-level entries by name (see the module docstring)."""


@dataclass(frozen=True)
class StringAuditResult:
    """The exact string audit's verdict on one step.

    Attributes:
        lossy: a scenario where the completed law is not the target's was found.
        distance: the largest exact total variation found (0 when lossless everywhere checked).
        scenarios: how many (pair, context) scenarios were computed.
        worst: the index of the scenario at ``distance`` (``None`` when lossless).
    """

    lossy: bool
    distance: Fraction
    scenarios: int
    worst: int | None


def audit_string_entry(
    law: StepLaw,
    scenarios: Sequence[tuple[StringPair, tuple[int, ...]]],
    *,
    k: int,
    stop_at_first: bool = False,
) -> StringAuditResult:
    """Judge a string-level step exactly: its completed law against the target's, per scenario.

    The verdict claims no more than it computed: ``lossy=False`` says the step is lossless *on
    these scenarios* (every completed law equal, ``==`` in Fractions).

    Args:
        law: ``(pair, context, k) -> Law``, e.g. ``STRING_ZOO[name].law``.
        scenarios: ``(pair, context)`` pairs.
        k: the most target tokens a step proposes.
        stop_at_first: return at the first lossy scenario.

    Raises:
        ValueError: no scenarios, ``k < 1``.
    """
    check_positive_int("k", k)
    if not scenarios:
        raise ValueError("audit_string_entry needs at least one (pair, context) scenario.")
    worst, index, computed = ZERO, None, 0
    for i, (pair, context) in enumerate(scenarios):
        distance = string_distance(law(pair, tuple(context), k), pair, context, k)
        computed += 1
        if distance > worst:
            worst, index = distance, i
            if stop_at_first:
                break
    return StringAuditResult(lossy=worst > 0, distance=worst, scenarios=computed, worst=index)
