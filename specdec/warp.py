"""Logits to probabilities: temperature, top-k, top-p and min-p, as the target is defined.

The warped distribution *is* the target of speculative decoding (``proofs/theory.md``, claim 8):
losslessness is with respect to ``warp_probs(target_logits, ...)`` at every prefix.

specdec's conventions, where engines differ: top-k keeps every token tied with the k-th largest
logit (``torch.topk`` alone keeps exactly k, choosing among the tied ones); top-p keeps the token
that crosses ``top_p`` and sorts stably (lower id first on ties); temperature 0 is the argmax,
lowest id on ties; filters apply in the order temperature, top-k, top-p, min-p. An engine whose
warping differs is not wrong for that: its target is its own warped law. The audit checks a
step against the engine's warping and reports how far it is from this one
(``specdec.testing.audit.scenarios.conventions``).
"""

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_logits, check_logits_argmax, check_sampling_options
from specdec.sampling import sample

__all__ = ["SamplingOptions", "point_mass", "warp_probs"]


def _one_hot(best: Tensor, vocab: int, device: torch.device) -> Tensor:
    """The float64 one-hot rows ``[*b, V]`` of the tokens ``best [*b]``: the law
    ``warp_probs`` gives at temperature 0."""
    row = torch.zeros((*best.shape, vocab), dtype=torch.float64, device=device)
    return row.scatter_(-1, best.unsqueeze(-1), 1.0)


def point_mass(
    logits: Float[Tensor, "*batch vocab"],
) -> tuple[Int[Tensor, "*batch"], Float[Tensor, "*batch vocab"]]:
    r"""``(argmax, warp_probs(logits, temperature=0))``: the token and the law it is drawn from.

    .. math::
        y = \min \arg\max_x z(x), \qquad \pi = \mathbb{1}[\,\cdot = y\,], \qquad
        \mathrm{sample}(\pi, u) = y \ \text{for every } u \in [0, 1)

    Sampling a point mass returns its token for every uniform, so at temperature 0 this is
    ``(sample(row, u), row)`` for any ``u`` without the inverse-CDF pass (tested in
    ``tests/test_step.py``). Ties go to the lowest id, as in ``warp_probs``.

    Args:
        logits: ``[*batch, V]`` floating logits (``-inf`` allowed, NaN and ``+inf`` refused).

    Returns:
        ``[*batch]`` int64 tokens and ``[*batch, V]`` float64 one-hot rows.

    Raises:
        TypeError: non-float logits. ValueError: NaN or ``+inf`` logits, a row of all ``-inf``.

    Example:
        >>> import torch
        >>> from specdec.warp import point_mass
        >>> point_mass(torch.tensor([1.0, 3.0, 3.0]))
        (tensor(1), tensor([0., 1., 0.], dtype=torch.float64))

    References:
        ``proofs/theory.md`` claim 6 (the tie rule; a one-hot target makes rejection greedy).
    """
    # One reduction checks the logits and finds the argmax (first maximal index, in the input
    # dtype: widening to float64 keeps the order).
    best = check_logits_argmax("logits", logits)
    return best, _one_hot(best, logits.shape[-1], logits.device)


def warp_probs(
    logits: Float[Tensor, "*batch vocab"],
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> Float[Tensor, "*batch vocab"]:
    r"""Turn logits into the sampling distribution, in float64.

    .. math::
        \pi = \mathrm{softmax}\big(\mathrm{minp}(\mathrm{topp}(\mathrm{topk}(z / T)))\big)

    Filters apply in this order, each to the output of the previous one (the transformers order:
    temperature, top-k, top-p, min-p); a filtered token gets probability exactly 0:

    1. **temperature** ``T``: ``z / T``. ``T = 0`` returns the one-hot of the argmax, lowest
       index on ties, and the filters are then irrelevant (the argmax survives all of them).
    2. **top-k**: keep every token whose logit is ``>=`` the k-th largest (ties at the boundary
       are all kept, as in transformers).
    3. **top-p**: sort the surviving probabilities in decreasing order (stable: lower index first
       on ties) and keep the smallest prefix whose mass reaches ``top_p``, including the token
       that crosses it. ``top_p = 1`` keeps everything.
    4. **min-p**: keep tokens with probability ``>= min_p * max probability``.

    Args:
        logits: ``[*batch, V]`` floating logits; ``-inf`` marks a token that is already excluded,
            NaN and ``+inf`` are refused.
        temperature: ``>= 0``.
        top_k: ``>= 1`` or ``None``.
        top_p: in ``(0, 1]`` or ``None``.
        min_p: in ``(0, 1]`` or ``None``.

    Returns:
        ``[*batch, V]`` float64 probabilities; each row sums to 1.

    Raises:
        TypeError: non-float logits or options of the wrong type.
        ValueError: NaN or ``+inf`` logits, a row of all ``-inf``, options out of range.

    Example:
        >>> import torch, specdec
        >>> specdec.warp_probs(torch.tensor([1.0, 3.0, 3.0]), temperature=0.0)
        tensor([0., 1., 0.], dtype=torch.float64)
        >>> specdec.warp_probs(torch.log(torch.tensor([0.5, 0.3, 0.2])), top_p=0.6)
        tensor([0.6250, 0.3750, 0.0000], dtype=torch.float64)

    References:
        Holtzman et al. 2020 (top-p); Nguyen et al. 2024 (min-p); ``proofs/theory.md`` claim 8.
    """
    checked = check_logits("logits", logits)
    check_sampling_options(temperature, top_k, top_p, min_p)
    if temperature == 0:
        return _one_hot(checked.argmax(dim=-1), checked.shape[-1], checked.device)
    scores = checked.to(torch.float64)
    vocab = scores.shape[-1]
    # Shift by the row maximum first: the maximum becomes 0, nothing overflows to +inf (which
    # would give NaN), and every filter below is invariant under a shift.
    # ``scores`` is a fresh tensor from here on (never the caller's), so it is divided and
    # filtered in place; dividing by 1 is exact, so it is skipped. The widened copy is fresh
    # already unless the logits were float64: then the shift makes the copy, else it is in place.
    highest = scores.amax(dim=-1, keepdim=True)
    scores = scores - highest if scores is checked else scores.sub_(highest)
    if temperature != 1.0:
        scores.div_(temperature)
    if top_k is not None and top_k < vocab:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]  # [*b, 1]
        scores.masked_fill_(scores < kth, -math.inf)
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(scores, dim=-1)
        order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
        sorted_probs = probs.gather(-1, order)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of strictly better tokens
        keep_sorted = mass_before < top_p  # includes the token that crosses top_p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        scores = scores.masked_fill(~keep, -math.inf)
    if min_p is not None:
        probs = torch.softmax(scores, dim=-1)
        floor = min_p * probs.amax(dim=-1, keepdim=True)
        scores = scores.masked_fill(probs < floor, -math.inf)
    return torch.softmax(scores, dim=-1)


@dataclass(frozen=True)
class SamplingOptions:
    """How logits become the sampling law: ``warp_probs``'s options as one value.

    Checked on construction (``ValueError``/``TypeError`` as ``warp_probs``). The generation
    loops take one for the target (``target_options``, the law the output follows) and one for
    the draft (``draft_options``, any: it changes speed, never the law).

    Example:
        >>> import torch
        >>> options = SamplingOptions(temperature=0.5, top_k=2)
        >>> options.probs(torch.tensor([0.0, 1.0, 2.0]))
        tensor([0.0000, 0.1192, 0.8808], dtype=torch.float64)
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None

    def __post_init__(self) -> None:
        check_sampling_options(self.temperature, self.top_k, self.top_p, self.min_p)

    def probs(self, logits: Float[Tensor, "*batch vocab"]) -> Float[Tensor, "*batch vocab"]:
        """``warp_probs(logits, ...)`` with these options (float64)."""
        return warp_probs(
            logits,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )

    def draw(
        self, logits: Float[Tensor, "batch vocab"], uniforms: Float[Tensor, " batch"]
    ) -> tuple[Int[Tensor, " batch"], Float[Tensor, "batch vocab"]]:
        """A token and the row it was sampled from: ``(sample(row, u), row)``, ``row =
        self.probs(logits)``. At temperature 0 the row is a point mass, which every ``u``
        samples to its argmax, so the inverse-CDF pass is skipped (same result, tested)."""
        if self.temperature == 0:
            return point_mass(logits)
        row = self.probs(logits)
        return sample(row, uniforms), row
