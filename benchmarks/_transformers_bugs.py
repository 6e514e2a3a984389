"""Bugs planted in transformers' assisted generation (its verification path), for the step
record's tests (``tests/test_transformers_record.py``) and ``bench_trace_smollm2``.

``planted(bug, temperature=T)`` is a context manager that replaces, for its duration, the
function transformers calls for one part of a step (the module attribute or class method it
looks up at run time), and restores it on exit:

* ``"bonus_temperature"``: ``transformers.generation.utils._speculative_sampling`` replaced
  by ``speculative_sampling(bug)``, whose bonus token (all drafts accepted) is drawn at
  temperature ``bonus_temperature`` (default 1) instead of ``T`` (the processed bonus logits
  times ``T / bonus_temperature``);
* ``"correction_from_p"``: the same rule drawing a rejected position's token from the target
  row ``p`` instead of the residual ``norm(max(0, p - q))``;
* ``"reused_uniform"``: the same rule testing every draft against one uniform;
* ``"q_unwarped"``: ``AssistedCandidateGenerator._generate_candidates`` returning the draft's
  *raw* logits as the candidate logits, while the assistant still samples its drafts from
  the warped ones (the verifier's ``q`` is then not the law the drafts came from).

``speculative_sampling(None)`` is the lossless rule with transformers' signature (the control
for the replacement itself). Written from Algorithm 1 of Leviathan et al. (2023), not copied.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

__all__ = ["HF_BUGS", "planted", "speculative_sampling", "unwarped_candidates"]

HF_BUGS = ("bonus_temperature", "correction_from_p", "q_unwarped", "reused_uniform")


def speculative_sampling(
    bug: str | None, *, temperature: float = 1.0, bonus_temperature: float = 1.0
) -> Callable[..., Any]:
    """A stand-in for ``_speculative_sampling`` with ``bug`` planted (``None``: lossless)."""

    def rule(
        candidate_input_ids: Tensor,
        candidate_logits: Tensor,
        candidate_length: int,
        new_logits: Tensor,
        assistant_ensemble_weight: float | None = None,
    ) -> tuple[Tensor, int]:
        drafts = candidate_input_ids[0, -candidate_length:]  # [k]
        draft_probs = candidate_logits[0].softmax(dim=-1)  # [k, V]
        target_probs = new_logits[0].softmax(dim=-1)  # [k+1, V]
        at = torch.arange(candidate_length)
        ratio = target_probs[at, drafts] / draft_probs[at, drafts]  # p_i(x_i) / q_i(x_i)
        if bug == "reused_uniform":
            uniforms = torch.rand(1).expand(candidate_length)  # one uniform for every draft
        else:
            uniforms = torch.rand(candidate_length)
        accepted = int((uniforms <= ratio).long().cumprod(0).sum())  # drafts before a rejection
        if accepted < candidate_length:  # correction: the residual at the rejected position
            law = (target_probs[accepted] - draft_probs[accepted]).clamp(min=0.0)
            if bug == "correction_from_p":
                law = target_probs[accepted]
        elif bug == "bonus_temperature":  # bonus: the processed logits are logits / T
            law = (new_logits[0, -1] * temperature / bonus_temperature).softmax(dim=-1)
        else:
            law = target_probs[-1]
        last = torch.multinomial(law / law.sum(), 1)  # [1]
        return torch.cat([drafts[:accepted], last])[None], accepted

    return rule


def unwarped_candidates(self: Any, generation_args: dict[str, Any]) -> tuple[Tensor, Tensor]:
    """A stand-in for ``AssistedCandidateGenerator._generate_candidates`` returning the
    assistant's raw logits (it still samples from the processed ones)."""
    self.generation_config.output_logits = True  # the config generation_args hands over
    output = self.assistant_model.generate(**generation_args, **self.assistant_kwargs)
    self.assistant_kwargs["cache"] = output.cache
    return output.sequences, torch.stack(output.logits, dim=1)


@contextmanager
def planted(
    bug: str | None, *, temperature: float = 1.0, bonus_temperature: float = 1.0
) -> Iterator[None]:
    """Within: transformers runs with ``bug`` planted (``None``: as installed)."""
    from transformers.generation import candidate_generator, utils

    if bug is None:
        yield
        return
    if bug not in HF_BUGS:
        raise ValueError(f"bug must be one of {HF_BUGS} or None, got {bug!r}.")
    if bug == "q_unwarped":
        owner: Any = candidate_generator.AssistedCandidateGenerator
        name, replacement = "_generate_candidates", unwarped_candidates
    else:
        owner, name = utils, "_speculative_sampling"
        replacement = speculative_sampling(
            bug, temperature=temperature, bonus_temperature=bonus_temperature
        )
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)
