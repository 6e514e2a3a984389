r"""Toy tokenizers: vocabularies of strings over a small alphabet, so string-level laws are exact.

A ``ToyTokenizer`` holds a vocabulary of distinct non-empty strings that contains every single
character its tokens use, so every text over that alphabet has a tokenization. ``decode``
concatenates token strings; ``encode`` is the *canonical* tokenization, the left-to-right longest
match (maximal munch):

.. math::
    \mathrm{encode}(w) = t\,\mathrm{encode}(w'), \qquad t = \text{the longest token with }
    w = t w'

Many id sequences decode to one text (``"a" "b"`` and ``"ab"``); ``encode`` picks one of them,
``decode(encode(w)) = w`` always, and ``encode(decode(x)) = x`` only for a canonical ``x``.
Two tokenizers over one alphabet are the heterogeneous vocabularies of the string-level rules
(``specdec.verify.strings``, ``specdec.string_law``; ``proofs/theory.md``, claim 22).

References:
    N. Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
    for Heterogeneous Vocabularies", ICML 2025 (string-level exact match and rejection sampling).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from specdec._checks import check_instance

__all__ = ["ToyTokenizer"]


@dataclass(frozen=True)
class ToyTokenizer:
    """A vocabulary of strings with a canonical (longest-match) tokenization.

    Attributes:
        tokens: the token strings; id ``i`` is ``tokens[i]``. Distinct, non-empty, and every
            character of every token is itself a token.

    Raises:
        TypeError: ``tokens`` not a tuple of strings.
        ValueError: an empty or repeated token, or a character that is not a token.

    Example:
        >>> tok = ToyTokenizer(("a", "b", "ab", "ba"))
        >>> tok.encode("abab"), tok.decode((0, 3, 1))
        ((2, 2), 'abab')
        >>> tok.longest_prefix("bab")
        3
    """

    tokens: tuple[str, ...]
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_instance("tokens", self.tokens, tuple, "a tuple of token strings")
        if not all(isinstance(token, str) for token in self.tokens):
            raise TypeError(f"tokens must be strings, got {self.tokens!r}.")
        if any(token == "" for token in self.tokens):
            raise ValueError("tokens must be non-empty strings (an empty token never ends).")
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError(f"tokens must be distinct, got {self.tokens!r}.")
        missing = sorted({c for token in self.tokens for c in token} - set(self.tokens))
        if missing:
            raise ValueError(
                f"every character must be a token so every text can be encoded; add {missing}."
            )
        object.__setattr__(self, "_ids", {token: i for i, token in enumerate(self.tokens)})

    @property
    def vocab_size(self) -> int:
        """The number of tokens."""
        return len(self.tokens)

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The single-character tokens, sorted."""
        return tuple(sorted(token for token in self.tokens if len(token) == 1))

    @property
    def max_length(self) -> int:
        """The length of the longest token."""
        return max(len(token) for token in self.tokens)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``: their token strings concatenated."""
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i!r} is not in [0, {self.vocab_size}).")
        return "".join(self.tokens[i] for i in ids)

    def longest_prefix(self, text: str) -> int:
        """The id of the longest token that is a prefix of ``text`` (non-empty)."""
        if not text:
            raise ValueError("longest_prefix needs a non-empty text.")
        for length in range(min(self.max_length, len(text)), 0, -1):
            found = self._ids.get(text[:length])
            if found is not None:
                return found
        raise ValueError(f"{text[0]!r} is not a character of this tokenizer's alphabet.")

    def encode(self, text: str) -> tuple[int, ...]:
        """The canonical tokenization of ``text``: longest match, left to right."""
        ids: list[int] = []
        position = 0
        while position < len(text):
            token = self.longest_prefix(text[position:])
            ids.append(token)
            position += len(self.tokens[token])
        return tuple(ids)

    def is_canonical(self, ids: Sequence[int]) -> bool:
        """Whether ``ids`` is the canonical tokenization of its own text."""
        return self.encode(self.decode(ids)) == tuple(ids)
