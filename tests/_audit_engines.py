"""Shared pieces of the audit's engine tests: a reference verifier, an engine's exactly-k
warping, a step built on it, and its target-only sampler."""

import math

import torch

import specdec
from specdec.testing.signatures import batched
from specdec.warp import warp_probs

SMALL = 20_000
ANY_POWER = 1.0  # these tests are about conventions, at few samples: any power accepted


@batched
def reference(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


def exactly_k(logits, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """An engine's warping whose top-k keeps exactly k tokens (torch.topk: no boundary ties)."""
    if top_k is None or temperature == 0:
        return warp_probs(logits, temperature=temperature, top_p=top_p)
    kept = torch.topk(logits, top_k, dim=-1).indices
    masked = torch.full_like(logits, -math.inf).scatter(-1, kept, logits.gather(-1, kept))
    return warp_probs(masked, temperature=temperature, top_p=top_p)


def engine_step(verify):  # type: ignore[no-untyped-def]
    @batched
    def step(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
        def law(logits):  # type: ignore[no-untyped-def]
            return exactly_k(logits, temperature=temperature, top_k=top_k, top_p=top_p)

        context, rows = prefix.long(), []
        for _ in range(k):
            row = law(draft_logits(context))
            token = specdec.sample(row, specdec.uniforms(generator, (context.shape[0],)))
            rows.append(row)
            context = torch.cat([context, token[:, None]], dim=1)
        length = prefix.shape[1]
        targets = [law(target_logits(context[:, : length + i])) for i in range(k + 1)]
        noise = specdec.uniforms(generator, (context.shape[0], k + 1))
        drafts, draft_rows = context[:, length:], torch.stack(rows, 1)
        return verify(drafts, draft_rows, torch.stack(targets, 1), noise).tokens

    return step


def exactly_k_sampler(logits, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """An engine's target-only sampler: its exactly-k warping, then torch.multinomial."""
    probs = exactly_k(logits.double(), temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
