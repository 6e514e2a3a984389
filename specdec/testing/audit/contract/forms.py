"""The call each level makes, checked against the function's parameters before the first call.

The audit calls a function in the form of its level (``subject``): a verifier with four
positional arguments, a step with five and three keywords, a multi-draft rule with four and a
tree rule with five (uniforms last), a stream sampler with two. A function whose parameters
cannot take that call would fail on its first call with an error that names neither the form
nor the fix (a two-parameter function reported as its own crash; a batched verifier given
``--multi-draft`` handed uniforms where it draws from a generator, failing inside
``torch.rand``). ``check_form`` binds the call to the function's signature instead (nothing is
called) and raises a ``FormError`` naming the expected signature(s): the form asked for, and
the forms the parameters would fit.

Example:
    >>> def two(draft_tokens, target_probs):
    ...     return draft_tokens
    >>> check_form(two, "verifier", "m:two")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    specdec.testing.audit.contract.forms.FormError: m:two(draft_tokens, target_probs) does ...
"""

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["CALLS", "NAMES", "SIGNATURES", "FormError", "check_form", "fitting_levels"]

CALLS: dict[str, tuple[int, tuple[str, ...]]] = {
    "verifier": (4, ()),
    "step": (5, ("temperature", "top_k", "top_p")),
    "position": (4, ()),
    "tree": (5, ()),
    "stream": (2, ()),
}
"""Each level's call: how many positional arguments, and which keywords."""

SIGNATURES = {
    "verifier": "fn(draft_tokens, draft_probs, target_probs, generator) -> block (a verifier; "
    "a VerifyRule names its fourth parameter uniforms; @batched for [N, ...] rows)",
    "step": "fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, "
    "top_p) -> block (--step)",
    "position": "fn(draft_tokens, draft_probs, target_probs, uniforms) -> .token "
    "(--multi-draft DRAW)",
    "tree": "fn(tree, draft_tokens, draft_probs, target_probs, uniforms) -> .tokens (--tree DRAW)",
    "stream": "fn(prompt, generator) -> new tokens (--stream)",
}
"""The signature each level expects, as the usage error prints it."""

NAMES = {
    "verifier": "verifier",
    "step": "step",
    "position": "multi-draft rule",
    "tree": "tree rule",
    "stream": "stream sampler",
}
"""Each level in words."""

_UNIFORMS = ("position", "tree")
"""Levels whose last positional argument is the uniforms (never a generator)."""


class FormError(ValueError):
    """The function's parameters do not take the call of the form asked for (a usage error)."""


def _binds(signature: inspect.Signature, level: str, ragged: bool) -> bool:
    positional, keywords = CALLS[level]
    named = {name: None for name in keywords}
    if ragged and level == "verifier":
        named["num_drafts"] = None
    try:
        signature.bind(*range(positional), **named)
    except TypeError:
        return False
    return True


def fitting_levels(fn: Callable[..., Any]) -> list[str]:
    """The levels whose call ``fn``'s parameters take (``CALLS``); every level when its
    signature cannot be read."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return list(CALLS)
    return [level for level in CALLS if _binds(signature, level, ragged=False)]


def check_form(fn: Callable[..., Any], level: str, name: str, *, ragged: bool = False) -> None:
    """Refuse ``fn`` when its parameters cannot take ``level``'s call (``CALLS``; ``ragged``:
    a verifier's ``num_drafts`` keyword too), or when a multi-draft or tree rule's uniforms
    would go to a parameter named ``generator`` (a verifier's). A signature that cannot be
    read is not checked.

    Raises:
        FormError: naming ``fn``'s parameters, the signature of ``level`` and the levels its
            parameters fit.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    parameters = list(signature.parameters)
    shown = f"{name}({', '.join(parameters)})"
    expected = f"a {NAMES[level]} is called as {SIGNATURES[level]}"
    if not _binds(signature, level, ragged):
        others = [other for other in CALLS if other != level and _binds(signature, other, False)]
        fits = (
            f"; its parameters fit {' or '.join(SIGNATURES[o] for o in others)}"
            if others
            else "; its parameters fit no form the audit runs"
        )
        raise FormError(f"{shown} does not take the audit's call: {expected}{fits}.")
    positional, _ = CALLS[level]
    if level in _UNIFORMS and len(parameters) >= positional:
        last = parameters[positional - 1]
        if last == "generator":
            raise FormError(
                f"{shown} takes a generator where {expected}: it looks like a verifier, "
                f"called as {SIGNATURES['verifier']} (audit it without --multi-draft/--tree)."
            )
