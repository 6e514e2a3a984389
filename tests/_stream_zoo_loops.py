"""Whole generation loops around the zoo's other registries, for the stream audit: multi-draft
and tree rules (``MULTI_ZOO``), string-level steps (``STRING_ZOO``) and batch couplings
(``COUPLING_ZOO``). Each returns a batched stream sampler, ``sample(prompts [N, L], generator)
-> [N, new_tokens]`` (``tests._stream_loops.step_loop`` runs the steps).

* ``multi_draft_step(rule, draw, candidates)``: one position per step, as a one-level tree
  with a bonus: ``candidates`` drafts drawn from the warped draft row as ``draw`` says
  (``simulate_tree.draft_candidates``), the rule verifies them against the warped target row,
  and when it accepted a candidate the target's next row gives a bonus token (block of 1 or 2
  tokens; the loop's ``k`` is 1).
* ``tree_step(rule, tree)``: a tree of ``tree``'s shape drafted after every row
  (``simulate_tree.draft_tree_rows``, rows warped), verified by the rule, its emitted block
  (``tree.depth + 1`` tokens at most; the loop's ``k`` is ``tree.depth``) appended.
* ``string_loop(law, pair, k=, new_tokens=)``: a string-level entry is an exact step law
  (``law(pair, context, k) -> Law`` of the emitted block of target ids), so each step draws
  its block from that law at the row's whole context (one uniform, inverse CDF over the
  blocks in sorted order), as a step with that law emits it; the target ids are appended.
* ``mixed_batch_loop(pair, options, verifier, ...)``: a batch served with a companion
  request in row 0 (its own prompt and ``SamplingOptions``; each row's draft and target rows
  warped with its own options), and optionally the audited rows seeded (each with a
  ``torch.Generator`` seeded from the audit's generator, passed as ``generators=``); only the
  audited rows are returned: how a bug coupling a row to the rest of its batch reaches a
  stream.
"""

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

import specdec
from specdec.exact import Law
from specdec.models import ToyModel, ToyPair
from specdec.multi_law import Draw
from specdec.noise import uniforms
from specdec.string_law import StringPair
from specdec.testing.signatures import batched
from specdec.testing.simulate_tree import draft_candidates, draft_tree_rows
from specdec.verify.tree import TokenTree

__all__ = ["mixed_batch_loop", "multi_draft_step", "string_loop", "tree_step"]


def _law_of(temperature: float, top_k: int | None, top_p: float | None) -> Callable[..., Tensor]:
    return specdec.SamplingOptions(temperature=temperature, top_k=top_k, top_p=top_p).probs


def multi_draft_step(
    rule: Callable[..., Any], draw: Draw, candidates: int
) -> Callable[..., Tensor]:
    """A batched step (``step_loop``'s, with ``k = 1``) around a ``MultiDraftRule``."""

    @batched
    def step(
        target_logits: Callable[[Tensor], Tensor],
        draft_logits: Callable[[Tensor], Tensor],
        prefix: Tensor,
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Tensor:
        del k  # one position: the block is the emitted token and, after an acceptance, a bonus
        law = _law_of(temperature, top_k, top_p)
        size = prefix.shape[0]
        draft_row, target_row = law(draft_logits(prefix)), law(target_logits(prefix))  # [N, V]
        drafts = draft_candidates(draft_row, candidates, draw, generator)  # [N, c]
        out = rule(drafts, draft_row, target_row, uniforms(generator, (size, candidates + 1)))
        token = out.token.long()  # [N]
        next_row = law(target_logits(torch.cat([prefix, token[:, None]], dim=1)))
        bonus = specdec.sample(next_row, uniforms(generator, (size,)))
        return torch.stack([token, torch.where(out.accepted >= 0, bonus, -1)], dim=1)

    return step


def tree_step(rule: Callable[..., Any], tree: TokenTree) -> Callable[..., Tensor]:
    """A batched step (``step_loop``'s, with ``k = tree.depth``) around a ``TreeRule``."""

    @batched
    def step(
        target_logits: Callable[[Tensor], Tensor],
        draft_logits: Callable[[Tensor], Tensor],
        prefix: Tensor,
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Tensor:
        del k  # the tree's depth
        law = _law_of(temperature, top_k, top_p)
        batch = draft_tree_rows(
            tree,
            lambda ids: law(target_logits(ids)),
            lambda ids: law(draft_logits(ids)),
            prefix.long(),
            generator,
        )
        noise = uniforms(generator, (prefix.shape[0], tree.size + 1))
        out = rule(tree, batch.tokens, batch.draft_probs, batch.target_probs, noise)
        return out.tokens.long()  # [N, depth + 1], -1-padded

    return step


def _block_table(law: Law) -> tuple[Tensor, Tensor]:
    """The law's blocks (sorted, ``-1``-padded ``[blocks, width]``) and their CDF."""
    blocks = sorted(law)
    width = max(len(block) for block in blocks)
    table = torch.tensor([[*block, *([-1] * (width - len(block)))] for block in blocks])
    total = sum(law.values(), Fraction(0))
    cdf = torch.tensor([float(law[block] / total) for block in blocks], dtype=torch.float64)
    return table, cdf.cumsum(0)


def string_loop(
    law: Callable[[StringPair, tuple[int, ...], int], Law],
    pair: StringPair,
    *,
    k: int,
    new_tokens: int,
) -> Callable[[Tensor, torch.Generator], Tensor]:
    """A batched stream sampler whose steps emit blocks with a string-level step's law."""
    tables: dict[tuple[int, ...], tuple[Tensor, Tensor]] = {}

    def table(context: tuple[int, ...]) -> tuple[Tensor, Tensor]:
        if context not in tables:
            tables[context] = _block_table(law(pair, context, k))
        return tables[context]

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size, length = prompts.shape
        width = new_tokens + k + 1
        text = torch.cat([prompts.long(), torch.full((size, width), -1)], dim=1)
        done = torch.zeros(size, dtype=torch.int64)
        while int(done.min()) < new_tokens:
            u = uniforms(generator, (size,))
            active = done < new_tokens  # a row with its tokens out is not stepped again
            keys, groups = torch.unique(text, dim=0, return_inverse=True)
            blocks = torch.full((size, k + 1), -1)
            for index, key in enumerate(keys.tolist()):
                rows = ((groups == index) & active).nonzero()[:, 0]
                if rows.numel() == 0:
                    continue
                blocks_of, cdf = table(tuple(t for t in key if t >= 0))
                pick = torch.searchsorted(cdf, u[rows], right=True).clamp(max=cdf.numel() - 1)
                blocks[rows, : blocks_of.shape[1]] = blocks_of[pick]
            position = length + done[:, None] + torch.arange(k + 1)  # [N, k+1]
            keep = (blocks >= 0) & (position < text.shape[1])
            slots = position.clamp(max=text.shape[1] - 1)
            text = text.scatter(1, slots, torch.where(keep, blocks, text.gather(1, slots)))
            done = done + keep.sum(1)
        return text[:, length : length + new_tokens]

    return sample


def mixed_batch_loop(
    pair: ToyPair,
    options: specdec.SamplingOptions,
    verifier: Callable[..., Tensor],
    *,
    k: int,
    new_tokens: int,
    companion_prompt: tuple[int, ...],
    companion: specdec.SamplingOptions,
    seeded: bool = False,
) -> Callable[[Tensor, torch.Generator], Tensor]:
    """A batched stream sampler: the audited requests (rows 1..N) served in one batch behind a
    companion request (row 0), each row drafted and verified with its own options by a batched
    verifier ``verifier(drafts, q, p, generator[, generators=])``; with ``seeded``, each
    audited row has its own generator (seeded from ``generator``), the companion none."""
    target, draft = pair.target, pair.draft
    vocab, order = target.vocab_size, max(target.order, draft.order)
    laws = [companion.probs, options.probs]

    def warped(model: ToyModel, context: Tensor) -> Tensor:
        logits = torch.log(model.float_probs(context))  # [N+1, V]
        return torch.cat([laws[0](logits[:1]), laws[1](logits[1:])])  # companion, then the rest

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size, length = prompts.shape
        if len(companion_prompt) > length:
            raise ValueError(f"the companion's prompt {companion_prompt} is longer than {length}.")
        padding = [vocab] * (length - len(companion_prompt))  # start symbols before it
        rows = torch.cat([torch.tensor([[*padding, *companion_prompt]]), prompts.long()])
        start = torch.full((size + 1, order), vocab)  # the start symbol before every prompt
        keywords: dict[str, Any] = {}
        if seeded:
            seeds = torch.randint(0, 2**62, (size,), generator=generator).tolist()
            keywords["generators"] = [None] + [torch.Generator().manual_seed(s) for s in seeds]
        out = torch.full((size + 1, new_tokens + k + 1), -1)
        done = torch.zeros(size + 1, dtype=torch.int64)
        while int(done[1:].min()) < new_tokens:
            text = torch.cat([start, rows, out], dim=1)
            tail = (length + done).clamp(max=text.shape[1] - order)  # the companion may run full
            context = text.gather(1, tail[:, None] + torch.arange(order))  # [N+1, order]
            drafts, draft_rows, target_rows = [], [], []
            for _ in range(k):
                row = warped(draft, context)
                token = specdec.sample(row, uniforms(generator, (size + 1,)))
                target_rows.append(warped(target, context))
                drafts.append(token)
                draft_rows.append(row)
                context = torch.cat([context[:, 1:], token[:, None]], dim=1)
            target_rows.append(warped(target, context))
            block = verifier(
                torch.stack(drafts, 1),
                torch.stack(draft_rows, 1),
                torch.stack(target_rows, 1),
                generator,
                **keywords,
            )  # [N+1, k+1], -1-padded
            position = done[:, None] + torch.arange(k + 1)
            keep = (block >= 0) & (position < out.shape[1])
            slots = position.clamp(max=out.shape[1] - 1)
            out = out.scatter(1, slots, torch.where(keep, block, out.gather(1, slots)))
            done = done + keep.sum(1)
        return out[1:, :new_tokens]

    return sample
