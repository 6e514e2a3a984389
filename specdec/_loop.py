"""The generation loops' private machinery: uniforms per row, the output buffer, the sampling
keywords that build ``SamplingOptions``, and the stopwatch around each model's calls."""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from specdec._checks import check_instance
from specdec.cache import KVCache
from specdec.models.base import CausalLM
from specdec.noise import uniforms
from specdec.warp import SamplingOptions

__all__ = ["FIELDS", "Generators", "Output", "Timed", "build_options", "check_keywords", "draw"]

Generators = torch.Generator | Sequence[torch.Generator]


def draw(generator: Generators, batch: int, width: int) -> Tensor:
    """``[batch, width]`` uniforms: one block from one generator, or one row per generator
    (``check_generators`` has checked there is one per row)."""
    if isinstance(generator, torch.Generator):
        return uniforms(generator, (batch, width))
    return torch.stack([uniforms(g, (width,)) for g in generator])


@dataclass(frozen=True)
class Output:
    """The tokens written so far: ``tokens [b, budget]`` (``-1`` where none yet), ``produced
    [b]`` tokens per row, ``done [b]`` rows that stopped (budget reached or EOS emitted)."""

    tokens: Tensor
    produced: Tensor
    done: Tensor

    @classmethod
    def empty(cls, batch: int, budget: int) -> "Output":
        return cls(
            torch.full((batch, budget), -1, dtype=torch.int64),
            torch.zeros(batch, dtype=torch.int64),
            torch.full((batch,), budget == 0),
        )

    def append(self, block: Tensor, length: Tensor, eos: int | None) -> "Output":
        """Each row's block (its first ``length`` tokens) after its output, cut at EOS and the
        budget."""
        budget = self.tokens.shape[1]
        slots = torch.arange(block.shape[1])[None, :]  # [1, w]
        valid = (slots < length[:, None]) & ~self.done[:, None]
        valid &= self.produced[:, None] + slots < budget
        hit = torch.zeros_like(self.done)
        if eos is not None:
            is_eos = (block == eos) & valid
            after = is_eos.long().cumsum(dim=1) - is_eos.long()  # EOS strictly before a slot
            valid &= after == 0
            hit = is_eos.any(dim=1)
        rows, cols = valid.nonzero(as_tuple=True)
        tokens = self.tokens.index_put((rows, self.produced[rows] + cols), block[rows, cols])
        produced = self.produced + valid.sum(dim=1)
        return Output(tokens, produced, self.done | hit | (produced >= budget))


FIELDS = ("temperature", "top_k", "top_p", "min_p")
_MOVED = {
    "draft_stop_below": "stopping=specdec.stopping.StopBelow(threshold)",
    "draft_stop_peak_below": "stopping=specdec.stopping.StopPeakBelow(threshold)",
    "vocabulary_map": "the draft wrapped as specdec.models.MappedDraft(draft, vocabulary_map)",
}


def check_keywords(keywords: Mapping[str, object], allowed: Sequence[str], caller: str) -> None:
    for name in keywords:
        if name in _MOVED:
            raise TypeError(f"{caller}() no longer takes {name}=; pass {_MOVED[name]}.")
        if name not in allowed:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}.")


def build_options(
    name: str,
    options: object,
    keywords: Mapping[str, object],
    prefix: str,
    default: SamplingOptions,
) -> SamplingOptions:
    """``options`` as given, or built from the keywords ``prefix + field`` (a keyword left out
    or ``None`` takes ``default``'s field); both together are refused."""
    given = {key: keywords[prefix + key] for key in FIELDS if prefix + key in keywords}
    if options is not None:
        if given:
            spelled = ", ".join(prefix + key for key in given)
            raise TypeError(f"pass either {name} or the keywords {spelled}, not both.")
        return check_instance(name, options, SamplingOptions, "SamplingOptions")
    values = {
        key: getattr(default, key) if given.get(key) is None else given[key] for key in FIELDS
    }
    return SamplingOptions(**values)  # type: ignore[arg-type]  # checked on construction


class Timed:
    """A model whose calls add their duration to ``seconds``: the loop's stopwatch, local to
    one ``generate_speculative`` call."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.seconds = 0.0

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    def forward(
        self,
        input_ids: Tensor,
        cache: KVCache | None,
        attention_mask: Tensor,
        position_ids: Tensor,
        logits_to_keep: int | None = None,
    ) -> tuple[Tensor, KVCache]:
        start = time.perf_counter()
        out = self.model.forward(input_ids, cache, attention_mask, position_ids, logits_to_keep)
        self.seconds += time.perf_counter() - start
        return out

    def lap(self) -> float:
        """The time accumulated since the last lap."""
        elapsed, self.seconds = self.seconds, 0.0
        return elapsed
