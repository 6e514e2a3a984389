"""curand's Philox4x32-10 stream, for reading back the coins a CUDA kernel draws.

Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC 2011) maps a 128-bit counter and a 64-bit key to four 32-bit words by ten rounds; this module
re-implements it from that description (no code is copied) and checks it against the paper's
published known-answer vectors (``tests/test_engines_chain.py``). curand's state, as its public
header ``curand_philox4x32_x.h`` / ``curand_kernel.h`` describes it: ``curand_init(seed,
subsequence, offset)`` sets the key to the seed's low and high words, adds ``subsequence`` to the
counter's high 64 bits and ``offset // 4`` to its low 64 bits, and starts at word
``offset % 4`` of that block; each ``curand()`` returns the next word, moving to the next
counter after the fourth.

Not checked here: the stream against a GPU (none was available when this was written); the
known-answer vectors check the block function, the state layout is as read from curand's header.

Example:
    >>> [hex(word) for word in philox4x32_10((0, 0, 0, 0), (0, 0))]
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
"""

__all__ = ["curand_words", "philox4x32_10"]

_MASK = 0xFFFFFFFF
_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)  # the golden ratio and sqrt(3) - 1, as 32-bit fractions


def philox4x32_10(
    counter: tuple[int, int, int, int], key: tuple[int, int]
) -> tuple[int, int, int, int]:
    """Philox4x32 with 10 rounds: each round multiplies words 0 and 2 by the two multipliers,
    swaps the halves crosswise and mixes in the key; the key is bumped between rounds."""
    x0, x1, x2, x3 = counter
    k0, k1 = key
    for round_index in range(10):
        if round_index:
            k0, k1 = (k0 + _KEY_STEPS[0]) & _MASK, (k1 + _KEY_STEPS[1]) & _MASK
        product0, product1 = _MULTIPLIERS[0] * x0, _MULTIPLIERS[1] * x2
        x0, x1, x2, x3 = (
            (product1 >> 32) ^ x1 ^ k0,
            product1 & _MASK,
            (product0 >> 32) ^ x3 ^ k1,
            product0 & _MASK,
        )
    return x0, x1, x2, x3


def curand_words(seed: int, subsequence: int, offset: int, count: int) -> list[int]:
    """The first ``count`` results of ``curand()`` after ``curand_init(seed, subsequence,
    offset)`` (all arguments unsigned 64-bit)."""
    key = (seed & _MASK, (seed >> 32) & _MASK)
    block = (subsequence << 64) + offset // 4  # the 128-bit counter, word 0 least significant
    word = offset % 4
    out: list[int] = []
    while len(out) < count:
        counter = block % 2**128
        words = philox4x32_10(
            (counter & _MASK, (counter >> 32) & _MASK, (counter >> 64) & _MASK, counter >> 96), key
        )
        out.extend(words[word:])
        word = 0
        block += 1
    return out[:count]
