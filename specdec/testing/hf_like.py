"""A transformers-like causal LM over a toy model, so engine steps written for one run unchanged.

Engines' speculative steps call their models as transformers does::

    out = model(input_ids, cache=cache, use_cache=True)
    out.logits            # [N, L_new, V]: next-token logits after each new position
    out.cache             # a transformers DynamicCache holding every token seen so far
    model.config.vocab_size

transformers renamed ``past_key_values`` to ``cache`` in 5.24 (the old name is deprecated and
removed in 5.40); the toy takes both names, as transformers 5.24 does, and its output answers to
both (``out.past_key_values`` is ``out.cache``), so a step written against either API runs.

``ToyCausalLM`` gives that interface over a ``specdec.models.toy.ToyModel``: its logits are
``log`` of the toy rows (``-inf`` for a zero probability) in the chosen dtype and device, after
each position of the concatenation of the cached tokens and ``input_ids``. The cache stores the
token ids themselves (as float32 keys and values of one layer and one head: exact for ids below
``2^24``), so a step that crops it after a rejection (``cache.crop(-n)``) or starts a fresh one
sees exactly the context it asked for. ``attention_mask``, ``position_ids`` and other keyword
arguments are accepted and ignored (every row is one sequence without padding).

transformers is imported on first use (it is slow to import); the audit hands these models to a
step with ``audit_step(..., model_interface="transformers")``.

Example:
    >>> import torch
    >>> from specdec.models.toy import make_toy_model
    >>> lm = ToyCausalLM(make_toy_model(3, seed=0))
    >>> out = lm(torch.tensor([[0, 2]]), use_cache=True)
    >>> out.logits.shape, out.cache.get_seq_length(), lm.config.vocab_size
    (torch.Size([1, 2, 3]), 2, 3)
    >>> step = lm(torch.tensor([[1]]), cache=out.cache, use_cache=True)
    >>> torch.equal(step.logits[0, -1], lm(torch.tensor([[0, 2, 1]])).logits[0, -1])
    True
"""

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.models.toy import ToyModel

__all__ = ["CausalLMOutput", "ToyCausalLM", "ToyConfig"]


@dataclass(frozen=True)
class ToyConfig:
    """The fields of a transformers config a step reads."""

    vocab_size: int
    is_encoder_decoder: bool = False


@dataclass(frozen=True)
class CausalLMOutput:
    """``logits [N, L_new, V]`` and the cache (``None`` without ``use_cache``)."""

    logits: Float[Tensor, "batch new vocab"]
    cache: Any = None

    @property
    def past_key_values(self) -> Any:
        """``cache`` under its name before transformers 5.24."""
        return self.cache


def _new_cache() -> Any:
    from transformers import DynamicCache

    return DynamicCache()


class ToyCausalLM:
    """``model(input_ids, cache=None, use_cache=...)`` over a toy model (module doc).

    Args:
        model: the toy model.
        dtype: the logits' dtype (default float64).
        device: the logits' device (default CPU).
    """

    def __init__(
        self,
        model: ToyModel,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> None:
        self.model = model
        self.dtype = dtype
        self.device = torch.device(device)
        self.config = ToyConfig(vocab_size=model.vocab_size)

    def __call__(
        self,
        input_ids: Int[Tensor, "batch new"],
        cache: Any = None,
        use_cache: bool | None = None,
        past_key_values: Any = None,
        **ignored: Any,
    ) -> CausalLMOutput:
        """Logits after each new position, given the cached tokens before them (``cache``, or
        ``past_key_values``: its name before transformers 5.24; not both)."""
        del ignored
        ids = input_ids.long().cpu()
        if ids.dim() != 2:
            raise ValueError(f"input_ids must be [N, L], got shape {tuple(input_ids.shape)}.")
        if cache is not None and past_key_values is not None:
            raise ValueError("pass the cache once: cache=... (past_key_values is its old name).")
        cache = past_key_values if cache is None else cache
        if cache is None and use_cache is not False:
            cache = _new_cache()
        if cache is not None:
            keys = ids.to(torch.float32)[:, None, :, None]  # [N, heads 1, L_new, dim 1]
            history = cache.update(keys, keys, 0)[0][:, 0, :, 0].long()  # every token so far
        else:
            history = ids
        new, total = ids.shape[1], history.shape[1]
        logits = torch.stack(
            [
                torch.log(self.model.float_probs(history[:, : total - new + i + 1]))
                for i in range(new)
            ],
            dim=1,
        )
        out = logits.to(device=self.device, dtype=self.dtype)
        return CausalLMOutput(out, cache if use_cache is not False else None)
