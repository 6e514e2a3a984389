"""What a stream sampler returned, checked before it is read: each misuse named.

A stream sampler is ``sample(prompt [L], generator) -> LongTensor [>= n]`` (one prompt), or
with ``@batched`` ``sample(prompts [N, L], generator) -> LongTensor [N, >= n]``: new tokens
only, the prompt excluded (``signatures.STREAM_SIGNATURES``). The audit reads a sampler's
output only through ``sampler_rows`` (its type and axes) and ``returned_prompt`` (the prompt
given back with the new tokens), so a misuse is an ``InvalidOutputError`` that says what was
expected and what came back, never an ``IndexError`` or ``TypeError`` from inside specdec:

* a Python list or tuple, or a NumPy array: named, with the fix (``torch.tensor(...)``);
* a single-sequence sampler that kept the batch axis (``[1, n]`` for one prompt): named, with
  both fixes (``out[0]``, or ``@batched``);
* a batched sampler that dropped it (``[n]`` for ``[N, L]`` prompts): named;
* every row starting with the prompt, and at least ``L + n`` tokens long: the prompt returned
  with the new tokens (transformers' ``generate`` does so), named, with the fix
  (``out[..., L:]``). A lossless engine whose first ``L`` new tokens repeat the prompt in
  every one of a chunk's rows (at least 2) and that returns ``L + n`` or more tokens is refused
  too: it then returns exactly ``n`` tokens, the only ones judged.

Example:
    >>> import torch
    >>> sampler_rows(torch.tensor([3, 1]), batched=False, rows=1).tolist()
    [[3, 1]]
    >>> sampler_rows([3, 1], batched=False, rows=1)
    Traceback (most recent call last):
    specdec.testing.audit.running.run.InvalidOutputError: the sampler returned a Python list ...
"""

from collections.abc import Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from specdec.testing.audit.running.run import InvalidOutputError

__all__ = ["FORMS", "returned_prompt", "sampler_rows"]

FORMS = (
    "sample(prompt [L], generator) -> LongTensor [n] (one prompt), or with @batched "
    "sample(prompts [N, L], generator) -> LongTensor [N, n]"
)
"""A stream sampler's two forms, as the misuse messages name them."""


def sampler_rows(out: object, *, batched: bool, rows: int) -> Int[Tensor, "rows m"]:
    """``out`` as ``[rows, m]`` integer rows (a single-sequence sampler's ``[m]`` gets its
    batch axis here), or an ``InvalidOutputError`` naming the misuse (module docstring)."""
    numpy = type(out).__module__ == "numpy"
    if isinstance(out, (list, tuple)) or numpy:
        kind = "a NumPy array" if numpy else f"a Python {type(out).__name__}"
        raise InvalidOutputError(
            f"the sampler returned {kind} ({str(out)[:40]}); a stream sampler returns a torch "
            f"integer tensor of new token ids: {FORMS} (wrap it: torch.tensor(...))."
        )
    if not isinstance(out, Tensor) or out.dtype not in (torch.int64, torch.int32):
        raise InvalidOutputError(f"expected an integer tensor of new tokens, got {out!r:.80}.")
    shape = tuple(out.shape)
    if not batched:
        if out.dim() == 1:
            return out[None]
        kept = " (it kept the batch axis: return out[0], or mark the sampler @batched to "
        kept += "take prompts [N, L] and return [N, n])" if out.dim() == 2 and shape[0] == 1 else ""
        raise InvalidOutputError(
            f"a single-sequence stream sampler returns [n] new tokens for one prompt [L], got "
            f"shape {shape}{kept}; the forms: {FORMS}."
        )
    if out.dim() != 2 or shape[0] != rows:
        dropped = " (it dropped the batch axis)" if out.dim() == 1 else ""
        raise InvalidOutputError(
            f"a batched stream sampler returns [N, n] new tokens for prompts [N, L] (N = "
            f"{rows}), got shape {shape}{dropped}; a sampler that takes one prompt [L] is not "
            f"marked @batched. The forms: {FORMS}."
        )
    return out


def returned_prompt(outputs: Sequence[Tensor], prompt: Sequence[int], n: int) -> None:
    """Refuse rows that are the prompt followed by the new tokens (module docstring):
    ``outputs`` are a chunk's ``[rows, m]`` pieces (``sampler_rows``), at least 2 rows."""
    length = len(prompt)
    ids = torch.tensor(tuple(prompt), dtype=torch.int64)
    if sum(int(o.shape[0]) for o in outputs) < 2 or any(o.shape[1] < length + n for o in outputs):
        return
    if all(bool((o[:, :length].cpu().long() == ids).all()) for o in outputs):
        raise InvalidOutputError(
            f"every row the sampler returned starts with the prompt {list(prompt)[:8]} and has "
            f"at least L + n = {length} + {n} tokens: it returned the prompt with the new "
            f"tokens (as generate does). Return the new tokens only (out[..., {length}:]), "
            f"or, if these are new tokens that repeat the prompt, exactly {n} of them; the "
            f"forms: {FORMS}."
        )
