r"""Heterogeneous vocabularies: a draft whose token ids are not the target's.

Speculative sampling compares two laws token by token, so the draft's law and the target's must
live on one vocabulary. ``VocabularyMap`` pairs the tokens two vocabularies share (draft id
``draft_ids[j]`` and target id ``target_ids[j]`` are the same token), and ``MappedDraft`` makes a
draft speak the target's vocabulary:

* it **reads** target ids: each is translated to its draft id, and a target token the draft
  lacks is read as ``draft_unknown_id``;
* it **returns** logits over the *target* vocabulary: the draft's logit on each shared token,
  ``-inf`` on every other target token (the *shared-vocabulary restriction*).

Warped with the draft's options, those logits give the law ``q'``: the draft's law restricted
to the shared tokens and renormalised,

.. math::

    q'(t) = \frac{q(d(t))}{\sum_{s \in S} q(d(s))} \text{ for } t \in S, \qquad
    q'(t) = 0 \text{ otherwise},

where ``S`` is the set of shared target tokens and ``d(t)`` the draft id of ``t``. The step
samples each draft from ``q'`` and verifies with that same ``q'`` (``DraftBlock`` pairs them), and
claim 2 holds for *any* draft law, so speculative sampling stays exactly lossless whatever the
vocabularies share and whatever the draft reads for unknown tokens (``proofs/theory.md``,
claim 12). The shared set only sets the acceptance rate: a target token outside it is never
drafted and is emitted only as a corrected or bonus token. Restricting the *target* too would
be lossy (it changes the law being sampled); specdec never does.

Edge case, decided: a draft row with no mass on the shared tokens (every shared logit ``-inf``)
has no restriction to renormalise; ``MappedDraft`` gives it logit 0 on every shared token (the
uniform law on ``S``), a valid draft law like any other. NaN and ``+inf`` logits are passed
through unchanged, so warping refuses them as it does for any model.

References:
    Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
    Heterogeneous Vocabularies", ICML 2025 (token-level intersection); Leviathan et al. 2023.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from specdec._checks import (
    check_float,
    check_instance,
    check_int_range,
    check_integer,
    check_last_dim,
    check_positive_int,
    check_tokens,
)
from specdec.cache import KVCache
from specdec.models.base import CausalLM

__all__ = ["MappedDraft", "VocabularyMap"]


@dataclass(frozen=True, eq=False)
class VocabularyMap:
    r"""The tokens a draft vocabulary and a target vocabulary share.

    .. math::
        S = \{t_j\}, \qquad d(t_j) = d_j \ (\text{draft id of } t_j), \qquad
        r(t) = d(t) \ (t \in S), \quad r(t) = u \ (t \notin S)

    where ``t_j = target_ids[j]``, ``d_j = draft_ids[j]`` and ``u = draft_unknown_id``: ``r`` is
    how the draft reads target ids, ``d`` where its logits go (``proofs/theory.md``, claim 12).

    Attributes:
        draft_ids: ``[shared]`` int64 draft ids, distinct, in ``[0, draft_vocab_size)``.
        target_ids: ``[shared]`` int64 target ids, distinct, in ``[0, target_vocab_size)``;
            ``target_ids[j]`` is the same token as ``draft_ids[j]``.
        draft_vocab_size: the draft's number of logits.
        target_vocab_size: the target's number of logits.
        draft_unknown_id: the draft id read in place of a target token the draft lacks; may be
            ``None`` only when every target id is shared.

    Raises:
        TypeError: non-integer ids or sizes.
        ValueError: ids of different lengths, none shared, out of range or repeated; a missing
            ``draft_unknown_id`` while some target id is not shared.

    Example:
        >>> import torch
        >>> vmap = VocabularyMap(torch.tensor([0, 2]), torch.tensor([3, 0]),
        ...                      draft_vocab_size=3, target_vocab_size=4, draft_unknown_id=1)
        >>> vmap.to_draft_ids(torch.tensor([[3, 0, 1]])).tolist()  # target id 1: unknown
        [[0, 2, 1]]
        >>> vmap.to_target_logits(torch.tensor([[1.0, 5.0, 2.0]])).tolist()
        [[2.0, -inf, -inf, 1.0]]
    """

    draft_ids: Int[Tensor, " shared"]
    target_ids: Int[Tensor, " shared"]
    draft_vocab_size: int
    target_vocab_size: int
    draft_unknown_id: int | None = None
    _target_to_draft: Int[Tensor, " target_vocab"] = field(init=False, repr=False)
    _gather: Int[Tensor, " target_vocab"] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        draft_vocab = check_positive_int("draft_vocab_size", self.draft_vocab_size)
        target_vocab = check_positive_int("target_vocab_size", self.target_vocab_size)
        draft_ids = check_tokens("draft_ids", self.draft_ids, draft_vocab)
        target_ids = check_tokens("target_ids", self.target_ids, target_vocab)
        if draft_ids.dim() != 1 or draft_ids.shape != target_ids.shape:
            raise ValueError(
                "draft_ids and target_ids must be 1-D and of one length (pairs of one token), "
                f"got shapes {tuple(draft_ids.shape)} and {tuple(target_ids.shape)}."
            )
        if draft_ids.numel() == 0:
            raise ValueError("The vocabularies must share at least one token, got none.")
        for name, ids in (("draft_ids", draft_ids), ("target_ids", target_ids)):
            if torch.unique(ids).numel() != ids.numel():
                raise ValueError(f"{name} must be distinct (one token per id), got repeats.")
        unknown = self.draft_unknown_id
        if unknown is None:
            if target_ids.numel() != target_vocab:
                raise ValueError(
                    f"{target_vocab - target_ids.numel()} target ids have no draft counterpart: "
                    "pass draft_unknown_id, the draft id the draft reads in their place."
                )
            unknown = 0  # never read: every target id is shared
        else:
            last = draft_vocab - 1
            check_int_range("draft_unknown_id", unknown, 0, last, high_is="the last draft id")
        table = torch.full((target_vocab,), unknown, dtype=torch.int64)
        table[target_ids] = draft_ids  # a fresh tensor: the arguments are not written
        # own copies: a caller writing into its tensors later cannot change the map
        object.__setattr__(self, "draft_ids", draft_ids.to(torch.int64, copy=True))
        object.__setattr__(self, "target_ids", target_ids.to(torch.int64, copy=True))
        object.__setattr__(self, "_target_to_draft", table)
        gather = torch.full((target_vocab,), draft_vocab, dtype=torch.int64)  # draft_vocab: -inf
        gather[target_ids] = draft_ids
        object.__setattr__(self, "_gather", gather)

    @classmethod
    def from_vocabularies(
        cls,
        draft_vocab: Mapping[str, int],
        target_vocab: Mapping[str, int],
        *,
        draft_vocab_size: int,
        target_vocab_size: int,
        draft_unknown_id: int | None = None,
    ) -> "VocabularyMap":
        """The map of the token strings both vocabularies hold (``tokenizer.get_vocab()``):
        ``S`` = the strings in both, each paired by its two ids (claim 12).

        Args:
            draft_vocab: token string -> draft id.
            target_vocab: token string -> target id.
            draft_vocab_size: the draft model's number of logits (may exceed the tokenizer's).
            target_vocab_size: the target model's number of logits.
            draft_unknown_id: see the class; e.g. the draft tokenizer's ``unk_token_id``.

        Returns:
            The map of the shared strings, in increasing target id.

        Raises:
            ValueError: a shared string whose id lies outside its model's logits.
        """
        shared = sorted(
            (target_vocab[token], draft_vocab[token]) for token in draft_vocab.keys() & target_vocab
        )
        for target_id, draft_id in shared:
            if not (0 <= draft_id < draft_vocab_size and 0 <= target_id < target_vocab_size):
                raise ValueError(
                    f"A shared token has draft id {draft_id} and target id {target_id}, outside "
                    f"the models' logits [0, {draft_vocab_size}) and [0, {target_vocab_size})."
                )
        return cls(
            draft_ids=torch.tensor([pair[1] for pair in shared], dtype=torch.int64),
            target_ids=torch.tensor([pair[0] for pair in shared], dtype=torch.int64),
            draft_vocab_size=draft_vocab_size,
            target_vocab_size=target_vocab_size,
            draft_unknown_id=draft_unknown_id,
        )

    def check_sizes(self, *, draft: int | None = None, target: int | None = None) -> None:
        """Raise ``ValueError`` unless the draft has ``draft`` logits and the target ``target``
        logits as this map was built for (a side given as ``None`` is not checked)."""
        for side, got, built in (
            ("draft", draft, self.draft_vocab_size),
            ("target", target, self.target_vocab_size),
        ):
            if got is not None and got != built:
                raise ValueError(
                    f"The {side} has V={got} logits but the vocabulary map was built for "
                    f"{side}_vocab_size={built}."
                )

    def to_draft_ids(self, target_ids: Int[Tensor, "*shape"]) -> Int[Tensor, "*shape"]:
        """Target ids as the draft reads them: ``r(t)`` (``draft_unknown_id`` where not shared;
        claim 12). Raises ``TypeError``/``ValueError`` for non-integer or out-of-range ids."""
        tokens = check_tokens("target_ids", target_ids, self.target_vocab_size)
        return self._target_to_draft[tokens]

    def to_target_logits(
        self, draft_logits: Float[Tensor, "*batch draft_vocab"]
    ) -> Float[Tensor, "*batch target_vocab"]:
        r"""Draft logits on the target vocabulary: shared tokens keep theirs, others ``-inf``.

        .. math::
            z'(t) = z(d(t)) \ (t \in S), \qquad z'(t) = -\infty \ (t \notin S)

        so ``softmax(z')`` is the draft's law restricted to ``S`` and renormalised (claim 12).
        A row whose shared logits are all ``-inf`` gets 0 on every shared token (module
        docstring). The dtype is the input's. Raises ``TypeError`` for non-float logits and
        ``ValueError`` for a last dimension other than ``draft_vocab_size``.
        """
        logits = check_float("draft_logits", draft_logits)
        check_last_dim("draft_logits", logits, self.draft_vocab_size, "the draft vocabulary")
        rows = draft_logits.reshape(-1, self.draft_vocab_size)  # [n, V_draft]
        minus_inf = rows.new_full((rows.shape[0], 1), -torch.inf)
        padded = torch.cat([rows, minus_inf], dim=1)  # [n, V_draft + 1]
        out = padded.index_select(1, self._gather)  # [n, V_target]: -inf where not shared
        out = out.reshape(*draft_logits.shape[:-1], self.target_vocab_size)
        dead: Bool[Tensor, "*batch 1"] = out.amax(dim=-1, keepdim=True) == -torch.inf
        if bool(dead.any()):  # no mass on the shared tokens: uniform on them
            shared = self._gather < self.draft_vocab_size  # [V_target]
            out = torch.where(dead & shared, torch.zeros_like(out), out)
        return out


class MappedDraft:
    r"""A draft model seen through a ``VocabularyMap``: target ids in, target-vocabulary logits out.

    .. math::
        \mathrm{logits}(c) = z'\big(\mathrm{draft}(r(c))\big)

    (``VocabularyMap.to_draft_ids`` then ``to_target_logits``; ``proofs/theory.md``, claim 12).
    A ``CausalLM`` itself, so the step and the loops use it like any draft; its cache is the
    wrapped model's own (draft ids), passed through untouched.

    Args:
        draft: any ``CausalLM`` with ``vocab_size == vocabulary_map.draft_vocab_size``.
        vocabulary_map: the shared tokens.

    Raises:
        TypeError: ``vocabulary_map`` is not a ``VocabularyMap``.
        ValueError: the draft's vocabulary size is not the map's.
    """

    def __init__(self, draft: CausalLM, vocabulary_map: VocabularyMap) -> None:
        check_instance("vocabulary_map", vocabulary_map, VocabularyMap, "a VocabularyMap")
        vocabulary_map.check_sizes(draft=draft.vocab_size)
        self.draft = draft
        self.vocabulary_map = vocabulary_map

    @property
    def vocab_size(self) -> int:
        """The target's vocabulary size."""
        return self.vocabulary_map.target_vocab_size

    @property
    def max_length(self) -> int | None:
        """The wrapped draft's maximum number of positions, if it states one."""
        limit = getattr(self.draft, "max_length", None)
        return limit if isinstance(limit, int) else None

    def forward(
        self,
        input_ids: Int[Tensor, "batch n"],
        cache: KVCache | None,
        attention_mask: Bool[Tensor, "batch total"],
        position_ids: Int[Tensor, "batch n"],
        logits_to_keep: int | None = None,
    ) -> tuple[Float[Tensor, "batch m target_vocab"], KVCache]:
        """The wrapped draft on the translated ids; its logits mapped to the target vocabulary."""
        draft_ids = self.vocabulary_map.to_draft_ids(check_integer("input_ids", input_ids))
        logits, new_cache = self.draft.forward(
            draft_ids, cache, attention_mask, position_ids, logits_to_keep
        )
        return self.vocabulary_map.to_target_logits(logits), new_cache
