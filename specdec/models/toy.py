"""Context-dependent toy language models with exact rational next-token tables.

A ``ToyModel`` of order ``m`` gives the law of the next token as a function of the last ``m``
tokens of the context (positions before the start of the context read as a start symbol). Every
row is a tuple of ``fractions.Fraction`` with a common denominator, so laws computed from it by
enumeration are exact; ``float_table`` is the float64 view of the same numbers for the torch
functions. Rows are generated from a seed by an explicit ``random.Random`` per row: no global
state, same seed, same model. A model is immutable (frozen, its table never written), so
``make_toy_model`` and ``make_toy_pair`` build each seeded model once per process and return
that same object afterwards (treat its ``float_table`` as read-only, as every caller does).
"""

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_int, check_not_above, check_positive_int, check_unit_interval

__all__ = ["ToyModel", "ToyPair", "make_toy_model", "make_toy_pair"]

_MOST_ROWS = "the most rows a toy model holds"
_CACHED = 256
"""Toy models and pairs kept built (``make_toy_model``, ``make_toy_pair``): every audit builds
its battery's pairs afresh, which was about a tenth of a small sampled audit's time."""

Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class ToyModel:
    """A next-token table indexed by the last ``order`` tokens.

    Attributes:
        vocab_size: ``V``; token ids are ``0 .. V-1``; ``V`` itself is the start symbol.
        order: how many previous tokens the law depends on (``>= 1``).
        rows: ``(V+1)**order`` rows of ``V`` Fractions, each summing to exactly 1, indexed by the
            context code (the last ``order`` tokens, left-padded with the start symbol, read as a
            base ``V+1`` number); empty for a float-only model (``from_table``: vocabularies
            too large for exact tables), whose exact laws are refused.
        float_table: ``[(V+1)**order, V]`` float64 view of ``rows``.
    """

    vocab_size: int
    order: int
    rows: tuple[Row, ...]
    float_table: Float[Tensor, "contexts vocab"] = field(compare=False, repr=False)

    def context_code(self, context: Sequence[int]) -> int:
        """The row index of a context (a sequence of token ids)."""
        tail = [self.vocab_size] * self.order + [int(token) for token in context]
        code = 0
        for token in tail[len(tail) - self.order :]:
            if not 0 <= token <= self.vocab_size:
                raise ValueError(f"context token {token} outside [0, {self.vocab_size}).")
            code = code * (self.vocab_size + 1) + token
        return code

    def probs(self, context: Sequence[int]) -> Row:
        """The exact next-token law after ``context``.

        Raises:
            ValueError: a float-only model (``from_table``) has no exact rows.
        """
        if not self.rows:
            raise ValueError(
                f"this V = {self.vocab_size} toy model is float-only (from_table): it has no "
                "exact rows; use float_probs."
            )
        return self.rows[self.context_code(context)]

    def float_probs(self, contexts: Int[Tensor, "batch seq"]) -> Float[Tensor, "batch vocab"]:
        """Vectorised float64 next-token rows for a batch of equal-length contexts."""
        batch, length = contexts.shape
        code = torch.zeros(batch, dtype=torch.int64)
        for back in range(self.order, 0, -1):  # oldest of the last `order` tokens first
            if back <= length:
                column = contexts[:, length - back].long()
            else:
                column = torch.full((batch,), self.vocab_size, dtype=torch.int64)  # start symbol
            code = code * (self.vocab_size + 1) + column
        return self.float_table[code]

    @classmethod
    def from_table(cls, order: int, table: Float[Tensor, "contexts vocab"]) -> "ToyModel":
        """A float-only model: ``table`` (``[(V+1)**order, V]``, rows summing to 1) as float64,
        no exact rows (``probs`` refuses; exact laws need ``from_rows``).

        Example:
            >>> import torch
            >>> model = ToyModel.from_table(1, torch.full((3, 2), 0.5))
            >>> model.float_probs(torch.tensor([[1]])).tolist()
            [[0.5, 0.5]]
        """
        vocab = int(table.shape[-1])
        if table.dim() != 2 or table.shape[0] != (vocab + 1) ** order:
            raise ValueError(
                f"table must be [(V+1)**order, V] = [{(vocab + 1) ** order}, {vocab}], got "
                f"{tuple(table.shape)}."
            )
        float_table = table.to(torch.float64)
        return cls(vocab_size=vocab, order=order, rows=(), float_table=float_table)

    @classmethod
    def from_rows(cls, vocab_size: int, order: int, rows: Sequence[Row]) -> "ToyModel":
        """A model from its exact rows (``(V+1)**order`` rows of ``V`` Fractions summing to 1)."""
        table = torch.tensor([[float(value) for value in row] for row in rows], dtype=torch.float64)
        return cls(vocab_size=vocab_size, order=order, rows=tuple(rows), float_table=table)


@dataclass(frozen=True)
class ToyPair:
    """A target and a draft over the same vocabulary."""

    target: ToyModel
    draft: ToyModel


def _random_row(
    rng: random.Random, vocab_size: int, denominator: int, zero_rate: float, one_hot_rate: float
) -> Row:
    if rng.random() < one_hot_rate:
        hot = rng.randrange(vocab_size)
        return tuple(Fraction(int(token == hot)) for token in range(vocab_size))
    support = [token for token in range(vocab_size) if rng.random() >= zero_rate]
    if not support:
        support = [rng.randrange(vocab_size)]
    support = support[:denominator]
    units = dict.fromkeys(support, 1)  # every supported token gets at least one unit
    weights = [rng.random() ** 3 for _ in support]  # cubed: peaked, far from uniform
    for token in rng.choices(support, weights=weights, k=denominator - len(support)):
        units[token] += 1
    return tuple(Fraction(units.get(token, 0), denominator) for token in range(vocab_size))


def make_toy_model(
    vocab_size: int,
    *,
    seed: int,
    order: int = 2,
    denominator: int = 24,
    zero_rate: float = 0.25,
    one_hot_rate: float = 0.1,
) -> ToyModel:
    """A seeded context-dependent toy model.

    Args:
        vocab_size: ``V >= 2``.
        seed: any int; the same seed gives the same model.
        order: context length the law depends on.
        denominator: every probability is a multiple of ``1 / denominator``.
        zero_rate: chance that a token gets probability 0 in a row (each row keeps one token).
        one_hot_rate: chance that a row is one-hot.

    Example:
        >>> from specdec.models.toy import make_toy_model
        >>> model = make_toy_model(3, seed=0)
        >>> sum(model.probs([0, 2]))
        Fraction(1, 1)
    """
    check_int("vocab_size", vocab_size, minimum=2)
    check_positive_int("order", order)
    check_positive_int("denominator", denominator)
    check_not_above("(vocab_size + 1) ** order", (vocab_size + 1) ** order, _MOST_ROWS, 100_000)
    check_unit_interval("zero_rate", zero_rate)
    check_unit_interval("one_hot_rate", one_hot_rate)
    return _toy_model(vocab_size, seed, order, denominator, zero_rate, one_hot_rate)


@functools.lru_cache(maxsize=_CACHED)
def _toy_model(
    vocab_size: int, seed: int, order: int, denominator: int, zero_rate: float, one_hot_rate: float
) -> ToyModel:
    """``make_toy_model``'s model for checked arguments, built once per arguments (module
    docstring: a model is immutable, its table shared)."""
    rows = [
        _random_row(
            random.Random(f"specdec-toy:{seed}:target:{code}"),
            vocab_size,
            denominator,
            zero_rate,
            one_hot_rate,
        )
        for code in range((vocab_size + 1) ** order)
    ]
    return ToyModel.from_rows(vocab_size, order, rows)


def make_toy_pair(
    vocab_size: int,
    *,
    seed: int,
    order: int = 2,
    denominator: int = 24,
    zero_rate: float = 0.25,
    one_hot_rate: float = 0.1,
    equal_rate: float = 0.15,
    closeness: Fraction = Fraction(0),
) -> ToyPair:
    """A seeded target and draft; a fraction ``equal_rate`` of the draft's rows equal the target's.

    The other draft rows are ``closeness * p + (1 - closeness) * r`` with ``r`` drawn
    independently with the same options, so ``closeness`` sets the acceptance rate (0: unrelated
    rows with zero-probability tokens on either side, disjoint supports and one-hot rows; 1: the
    draft equals the target).

    Example:
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(4, seed=1)
        >>> pair.target.vocab_size == pair.draft.vocab_size == 4
        True
    """
    check_unit_interval("equal_rate", equal_rate)
    check_unit_interval("closeness", float(closeness))
    make_toy_model(  # checks the other options (and builds the target once)
        vocab_size,
        seed=seed,
        order=order,
        denominator=denominator,
        zero_rate=zero_rate,
        one_hot_rate=one_hot_rate,
    )
    options = (order, denominator, zero_rate, one_hot_rate, equal_rate, Fraction(closeness))
    return _toy_pair(vocab_size, seed, *options)


@functools.lru_cache(maxsize=_CACHED)
def _toy_pair(
    vocab_size: int,
    seed: int,
    order: int,
    denominator: int,
    zero_rate: float,
    one_hot_rate: float,
    equal_rate: float,
    mix: Fraction,
) -> ToyPair:
    """``make_toy_pair``'s pair for checked arguments, built once per arguments (module
    docstring); its target is ``make_toy_model``'s."""
    target = _toy_model(vocab_size, seed, order, denominator, zero_rate, one_hot_rate)
    rows = []
    for code, target_row in enumerate(target.rows):
        rng = random.Random(f"specdec-toy:{seed}:draft:{code}")
        if rng.random() < equal_rate:
            rows.append(target_row)
        else:
            other = _random_row(rng, vocab_size, denominator, zero_rate, one_hot_rate)
            rows.append(
                tuple(mix * p + (1 - mix) * r for p, r in zip(target_row, other, strict=True))
            )
    return ToyPair(target=target, draft=ToyModel.from_rows(vocab_size, order, rows))
