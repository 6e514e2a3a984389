"""Toy tree engines that record their steps, one correct and one per planted bug.

``toy_tree_trace(bug, ...)`` runs ``steps`` tree verification steps of a toy engine on random
rows (no model: each step's target and draft logits per node context are drawn from a seeded
generator, the draft's close to the target's), drafts every node's token i.i.d. from its
parent's draft row, verifies, and returns the ``Trace`` recorded with ``record_tree_step``
(rule ``"tree"``). The engines (``TREE_TRACE_BUGS``):

* ``"none"``: ``specdec.verify_tree`` itself (recursive rejection of i.i.d. children), the
  control;
* ``"residual_not_updated"``: every sibling tested against the node's target row ``p_v``
  (not the running residual), the correction drawn from ``norm(max(0, p_v - q_v))`` once: a
  sibling repeating a rejected token can then be accepted;
* ``"without_replacement_rule"``: the rule for children drawn without replacement (``q``
  loses each rejected child) on i.i.d. children (``walk_tree(..., "without_replacement")``);
* ``"bonus_temperature"``: ``verify_tree``, but the bonus at a leaf drawn from the leaf's target
  row at temperature 1, the record claiming the law's rows (no forbidden outcome: only the
  bonus PITs see it).

Used by the tests of ``tree_record`` and of the tree trace's judgement; imports no test helper.
"""

import torch
from torch import Tensor

from specdec._kernels import inverse_cdf, residual
from specdec.sampling import sample
from specdec.testing._trace_types import Trace
from specdec.testing.trace_zoo import assemble_trace
from specdec.testing.tree_record import TreeStepRecord, record_tree_step
from specdec.verify.tree import TokenTree, TreeVerification, verify_tree, walk_tree
from specdec.warp import SamplingOptions

__all__ = ["TREE", "TREE_TRACE_BUGS", "toy_tree_trace"]

TREE_TRACE_BUGS = ("none", "residual_not_updated", "without_replacement_rule", "bonus_temperature")
"""The toy tree engines ``toy_tree_trace`` runs; ``"none"`` is correct."""

TREE = (-1, -1, -1, 0, 0, 1, 3)
"""The default tree: three children of the root, two under node 0, one under nodes 1 and 3
(depth 3)."""


def _stale_walk(
    tree: TokenTree, tokens: Tensor, draft: Tensor, target: Tensor, noise: Tensor
) -> tuple[list[int], list[int]]:
    """``"residual_not_updated"``'s walk of one step (rows ``[n+1, V]``, ``noise [n+1]``): its
    emitted tokens and accepted nodes."""
    node, ids = -1, tokens.tolist()
    emitted: list[int] = []
    path: list[int] = []
    while kids := tree.children(node):
        row, law = target[node + 1], draft[node + 1]
        ratios = [min(1.0, float(row[ids[kid]] / law[ids[kid]])) for kid in kids]
        chosen = next(
            (kid for kid, r in zip(kids, ratios, strict=True) if float(noise[kid]) < r), None
        )
        if chosen is None:  # every child rejected: one residual, as if one child was tried
            return [*emitted, int(inverse_cdf(residual(row, law), noise[-1]))], path
        emitted.append(ids[chosen])
        path.append(chosen)
        node = chosen
    return [*emitted, int(inverse_cdf(target[node + 1], noise[-1]))], path


def _hot_bonus(
    tree: TokenTree, walked: TreeVerification, logits: Tensor, noise: Tensor
) -> TreeVerification:
    """``walked`` with each step ending at a leaf given a bonus drawn at temperature 1 from
    its logits ``[steps, n+1, V]`` with the step's last uniform ``noise [steps]``."""
    steps = torch.arange(logits.shape[0])
    last = torch.full_like(walked.num_accepted, -1)  # the last accepted node, -1: the root
    has = walked.num_accepted > 0
    last[has] = walked.path[steps[has], walked.num_accepted[has] - 1]
    leaf = torch.tensor([not tree.children(int(node)) for node in last.tolist()])
    hot = inverse_cdf(SamplingOptions().probs(logits[steps, last + 1]), noise)  # [steps]
    tokens = walked.tokens.clone()
    tokens[steps[leaf], walked.num_accepted[leaf]] = hot[leaf]
    return TreeVerification(walked.num_accepted, walked.path, tokens)


def toy_tree_trace(
    bug: str = "none",
    *,
    steps: int = 200,
    parents: tuple[int, ...] = TREE,
    vocab: int = 6,
    temperature: float = 0.7,
    sequences: int = 2,
    seed: int = 0,
    draft_noise: float = 0.8,
) -> Trace:
    """The recorded tree trace of ``steps`` steps of the toy engine ``bug`` (module docstring).

    Args:
        bug: one of ``TREE_TRACE_BUGS``.
        steps: steps in all, split evenly over ``sequences`` (in order, positions following
            each other).
        parents: the tree (``TokenTree.parents``), the same at every step.
        vocab: ``V``. temperature: the law's (``> 0``).
        sequences: sequences (prompts ``(0,)``, ``(1,)``, ... modulo ``V``).
        seed: the engine's seed.
        draft_noise: the spread of the draft's logits around the target's.

    Raises:
        ValueError: an unknown ``bug``.

    Example:
        >>> trace = toy_tree_trace(steps=4)
        >>> trace.steps, trace.rule, trace.sequences[0][0].parents
        (4, 'tree', (-1, -1, -1, 0, 0, 1, 3))
    """
    if bug not in TREE_TRACE_BUGS:
        raise ValueError(f"bug must be one of {TREE_TRACE_BUGS}, got {bug!r}.")
    generator = torch.Generator().manual_seed(seed)
    law, tree, n = SamplingOptions(temperature=temperature), TokenTree(parents, "iid"), len(parents)
    target_logits = 1.5 * torch.randn(steps, n + 1, vocab, generator=generator, dtype=torch.float64)
    noise = torch.randn(steps, n + 1, vocab, generator=generator, dtype=torch.float64)
    target, draft = law.probs(target_logits), law.probs(target_logits + draft_noise * noise)
    uniforms = torch.rand(steps, 2 * n + 1, generator=generator, dtype=torch.float64)
    parent_rows = torch.tensor(parents) + 1
    tokens = sample(draft[:, parent_rows], uniforms[:, :n])  # [steps, n]: parents' rows
    deciding = uniforms[:, n:]  # [steps, n+1]
    if bug == "residual_not_updated":
        blocks = [
            _stale_walk(tree, tokens[s], draft[s], target[s], deciding[s]) for s in range(steps)
        ]
    else:
        walked = (
            verify_tree(tree, tokens, draft, target, deciding)
            if bug != "without_replacement_rule"
            else walk_tree(tree, tokens, draft, target, deciding, "without_replacement")
        )
        if bug == "bonus_temperature":
            walked = _hot_bonus(tree, walked, target_logits, deciding[:, n])
        lengths = (walked.num_accepted + 1).tolist()
        blocks = [
            (walked.tokens[s, : lengths[s]].tolist(), walked.path[s, : lengths[s] - 1].tolist())
            for s in range(steps)
        ]

    def record(step: int, position: int) -> TreeStepRecord:
        block, path = blocks[step]
        emitted, accepted = torch.tensor(block), torch.tensor(path, dtype=torch.long)
        return record_tree_step(tree, tokens[step], emitted, draft[step], target[step],
                                path=accepted, position=position)  # fmt: skip

    return assemble_trace(law, vocab, "tree", steps, sequences, record)
