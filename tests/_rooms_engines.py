"""Audited functions that record the specdec modules on the stack at every call, importable
by name (``tests._rooms_engines:verifier``) for ``tests/test_rooms.py``.

``stack_modules`` is the chain of "rooms" a call passes through: the ``specdec`` modules of
the frames on the stack, outermost first, a run of consecutive frames of one module counted
once (a module calling itself, or a generator of one module resumed by another of its
frames, stays in its room).
"""

import sys

import torch
from torch import Tensor

import specdec
from specdec.testing.signatures import batched
from tests._stream_scale import lossless_sampler

STACKS: list[tuple[str, tuple[str, ...]]] = []
"""Every recorded chain, with where it was recorded (``"call"``: the audited function)."""


def stack_modules() -> tuple[str, ...]:
    """The ``specdec`` modules on the caller's stack, outermost first, consecutive repeats
    collapsed."""
    frame = sys._getframe(1)
    names: list[str] = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if name.startswith("specdec") and (not names or names[-1] != name):
            names.append(name)
        frame = frame.f_back  # type: ignore[assignment]
    return tuple(reversed(names))


def verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """``specdec.verify_tokens`` on one sequence: a lossless verifier that records its rooms."""
    STACKS.append(("call", stack_modules()))
    uniforms = specdec.uniforms(generator, (1, draft_tokens.shape[0] + 1))
    return specdec.verify_tokens(
        draft_tokens[None], draft_probs[None], target_probs[None], uniforms
    ).tokens[0]


@batched
def stream_sampler(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """``tests._stream_scale.lossless_sampler``, recording its rooms."""
    STACKS.append(("call", stack_modules()))
    return lossless_sampler(prompts, generator)
