"""Claim 9 (cache slicing): for a causal model, cropping the cache of a sequence s to its first
n positions and extending it with tokens e gives exactly the outputs and the cache of running
the model from scratch on s[:n] + e. This is what makes rolling back rejected drafts correct.

Checked exactly on a two-layer causal attention model in ``Fraction`` arithmetic built here
(attention weights ``1 + (key . query)^2`` instead of a softmax, so everything stays rational),
over every sequence, crop point and extension of a small box; then ``specdec.cache.crop_cache`` on
a tuple-of-``(key, value)`` torch cache of the same model in modular integer arithmetic held in
float64 (exact), against recomputation with ``torch.equal``. Two negative controls show what the
claim needs: a non-causal (bidirectional) model, and a crop that keeps one row too many.
See ``proofs/theory.md``, claim 9.
"""

import functools
import itertools
from fractions import Fraction

import torch
from _common import run_checks

from specdec.cache import cache_length, crop_cache

VOCAB = 3
SEQUENCES = list(itertools.product(range(VOCAB), repeat=3))  # s: 27 sequences of length 3
EXTENSIONS = [e for n in (1, 2) for e in itertools.product(range(VOCAB), repeat=n)]  # 12
LAYERS = (  # (query, key, value) integer 2x2 matrices per layer
    (((1, 2), (0, 1)), ((1, 0), (1, 1)), ((2, 1), (1, 0))),
    (((0, 1), (1, 1)), ((1, 1), (0, 2)), ((1, 0), (1, 3))),
)
MODULUS = 10007  # the torch twin computes mod a prime: integers < 2^53, exact in float64

Vector = tuple[Fraction, Fraction]
Cache = list[list[tuple[Vector, Vector]]]  # per layer, per position: (key, value)


def apply(matrix: tuple[tuple[int, int], ...], vector: Vector) -> Vector:
    return (
        matrix[0][0] * vector[0] + matrix[0][1] * vector[1],
        matrix[1][0] * vector[0] + matrix[1][1] * vector[1],
    )


def embed(token: int, position: int) -> Vector:
    return (Fraction(token + 1), Fraction(position + 1, 2))


def attend(query: Vector, rows: list[tuple[Vector, Vector]]) -> Vector:
    """``sum_j w_j v_j / sum_j w_j`` with ``w_j = 1 + (k_j . query)^2 > 0``."""
    weights = [1 + (key[0] * query[0] + key[1] * query[1]) ** 2 for key, _ in rows]
    total = sum(weights, Fraction(0))
    return (
        sum((w * v[0] for w, (_, v) in zip(weights, rows, strict=True)), Fraction(0)) / total,
        sum((w * v[1] for w, (_, v) in zip(weights, rows, strict=True)), Fraction(0)) / total,
    )


def extend(cache: Cache, tokens: tuple[int, ...]) -> tuple[list[Vector], Cache]:
    """Run the causal model on ``tokens`` after the cached positions: outputs and new cache."""
    start = len(cache[0]) if cache else 0
    new: Cache = [list(layer) for layer in cache] if cache else [[] for _ in LAYERS]
    outputs = []
    for offset, token in enumerate(tokens):
        hidden = embed(token, start + offset)
        for layer, (query_m, key_m, value_m) in zip(new, LAYERS, strict=True):
            layer.append((apply(key_m, hidden), apply(value_m, hidden)))  # this position's row
            mixed = attend(apply(query_m, hidden), layer)  # positions <= this one only
            hidden = (hidden[0] + mixed[0], hidden[1] + mixed[1])
        outputs.append(hidden)
    return outputs, new


def bidirectional_cache(tokens: tuple[int, ...]) -> Cache:
    """Negative control: layer 1 attends to every position, later ones included."""
    hidden = [embed(t, i) for i, t in enumerate(tokens)]
    cache: Cache = []
    for query_m, key_m, value_m in LAYERS:
        rows = [(apply(key_m, h), apply(value_m, h)) for h in hidden]
        cache.append(rows)
        mixed = [attend(apply(query_m, h), rows) for h in hidden]
        hidden = [(h[0] + m[0], h[1] + m[1]) for h, m in zip(hidden, mixed, strict=True)]
    return cache


@functools.cache
def run(tokens: tuple[int, ...]) -> tuple[list[Vector], Cache]:
    """The model from scratch on ``tokens`` (memoised: many cases share a sequence)."""
    return extend([], tokens)


def check_crop_then_extend_equals_recompute() -> int:
    """Fraction model: crop(cache(s), n) + extend(e) == run(s[:n] + e), outputs and cache."""
    cases = 0
    for sequence in SEQUENCES:
        full = run(sequence)[1]
        for n in range(len(sequence) + 1):
            cropped = [layer[:n] for layer in full]
            assert cropped == run(sequence[:n])[1], (sequence, n)  # the prefix's own cache
            for extension in EXTENSIONS:
                outputs, cache = extend(cropped, extension)
                fresh_outputs, fresh_cache = run((*sequence[:n], *extension))
                assert outputs == fresh_outputs[n:] and cache == fresh_cache, (sequence, n)
                cases += 1
    return cases


def check_negative_controls() -> int:
    """Non-causal model, or a crop keeping one row too many: crop + extend != recompute."""
    noncausal = stale = cases = 0
    for sequence in SEQUENCES:
        full = bidirectional_cache(sequence)
        for n in range(1, len(sequence)):
            noncausal += [layer[:n] for layer in full] != bidirectional_cache(sequence[:n])
            cases += 1
            kept = [layer[: n + 1] for layer in run(sequence)[1]]  # off by one
            for extension in EXTENSIONS:
                stale += extend(kept, extension)[1] != run((*sequence[:n], *extension))[1]
    assert noncausal > cases // 2 and stale == cases * len(EXTENSIONS), (noncausal, stale)
    return cases


# The torch twin: the same causal model over the integers mod MODULUS, float64 tensors.
def torch_extend(
    cache: tuple[tuple[torch.Tensor, torch.Tensor], ...], tokens: tuple[int, ...]
) -> tuple[torch.Tensor, tuple[tuple[torch.Tensor, torch.Tensor], ...]]:
    """Tuple cache ``((key, value), ...)``, tensors ``[batch=1, heads=1, seq, head_dim=2]``."""
    start = cache[0][0].shape[-2] if cache else 0
    layers = (
        [list(pair) for pair in cache]
        if cache
        else [[torch.zeros(1, 1, 0, 2, dtype=torch.float64)] * 2 for _ in LAYERS]
    )
    outputs = []
    for offset, token in enumerate(tokens):
        hidden = torch.tensor([token + 1.0, start + offset + 1.0], dtype=torch.float64)
        for layer, matrices in zip(layers, LAYERS, strict=True):
            query_m, key_m, value_m = (torch.tensor(m, dtype=torch.float64) for m in matrices)
            key = (key_m @ hidden).remainder(MODULUS)
            value = (value_m @ hidden).remainder(MODULUS)
            layer[0] = torch.cat([layer[0], key.view(1, 1, 1, 2)], dim=2)  # [1, 1, seq, 2]
            layer[1] = torch.cat([layer[1], value.view(1, 1, 1, 2)], dim=2)
            scores = (layer[0][0, 0] @ (query_m @ hidden).remainder(MODULUS)).remainder(MODULUS)
            weights = (1 + scores * scores).remainder(MODULUS)  # [seq], unnormalised
            hidden = (hidden + weights @ layer[1][0, 0]).remainder(MODULUS)  # [2]
        outputs.append(hidden)
    return torch.stack(outputs), tuple((k, v) for k, v in layers)


def check_specdec_crop_cache() -> int:
    """specdec.cache.crop_cache on a tuple torch cache: crop + extend == recompute (torch.equal)."""
    cases = 0
    for sequence in SEQUENCES:
        _, full = torch_extend((), sequence)
        before = [(k.clone(), v.clone()) for k, v in full]
        for n in range(len(sequence) + 1):
            cropped = crop_cache(full, n)
            assert isinstance(cropped, tuple) and cache_length(cropped) == n
            for extension in EXTENSIONS:
                outputs, cache = torch_extend(cropped, extension)
                fresh_outputs, fresh_cache = torch_extend((), (*sequence[:n], *extension))
                assert torch.equal(outputs, fresh_outputs[n:]), (sequence, n, extension)
                for (k, v), (fresh_k, fresh_v) in zip(cache, fresh_cache, strict=True):
                    assert torch.equal(k, fresh_k) and torch.equal(v, fresh_v)
                cases += 1
        for (k, v), (k0, v0) in zip(full, before, strict=True):  # the input was not modified
            assert torch.equal(k, k0) and torch.equal(v, v0)
    return cases


CHECKS = [
    check_crop_then_extend_equals_recompute,
    check_negative_controls,
    check_specdec_crop_cache,
]


def test_crop_then_extend_equals_recompute() -> None:
    check_crop_then_extend_equals_recompute()


def test_negative_controls() -> None:
    check_negative_controls()


def test_specdec_crop_cache() -> None:
    check_specdec_crop_cache()


if __name__ == "__main__":
    run_checks("claim 09", CHECKS)
