"""``TreeStepRecord``: one tree step of one sequence, and ``tree_walk``, the path a step took.

The values of ``specdec.testing.tree_record`` (its docstring says what each field holds). An
engine names the nodes it accepted (``path``), or they are read from the emitted tokens
(``read_path``): at each node the emitted token is the first child carrying it (accepted), or
else the step's last token (the correction, or the bonus at a leaf). Under recursive rejection
of i.i.d. children that reading is exact: a rejected child's token has mass 0 in every later
residual, so neither a later sibling with the same token nor the correction can carry it
(``proofs/theory.md`` claim 16 (a)); an engine that breaks the rule may need ``path``.
"""

import functools
from dataclasses import dataclass

from specdec.verify.tree import TokenTree

__all__ = ["TreeStepRecord", "TreeWalk", "read_path", "tree_walk"]


@dataclass(frozen=True)
class TreeWalk:
    """The path a tree step took.

    Attributes:
        path: the accepted nodes, from the root's child down.
        examined: ``(node, accepted)`` for every child the rule examined, in the order it did:
            at each visited node its children in node order up to the accepted one (all of
            them at the node whose children were all rejected).
        visited: the nodes whose row a decision or the last token was drawn from: ``-1`` (the
            root), then each accepted node but, for a cut step, the last; one per emitted token.
        ending: ``"correction"`` (the last visited node's children all rejected), ``"bonus"``
            (the last visited node is a leaf) or ``"cut"`` (the step ends on an accepted node:
            an EOS or the budget).
    """

    path: tuple[int, ...]
    examined: tuple[tuple[int, bool], ...]
    visited: tuple[int, ...]
    ending: str


def _children(parents: tuple[int, ...]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    return children


def read_path(
    parents: tuple[int, ...], drafted: tuple[int, ...], emitted: tuple[int, ...]
) -> tuple[int, ...]:
    """The accepted nodes read from the emitted tokens: at each node, the first child carrying
    the next emitted token (module docstring), until none does.

    Raises:
        ValueError: tokens after the first that no child carries (a correction or bonus must
        be the step's last token).
    """
    children, path, node = _children(parents), [], -1
    for place, token in enumerate(emitted):
        node = next((kid for kid in children.get(node, []) if drafted[kid] == token), -2)
        if node == -2:
            if place != len(emitted) - 1:
                raise ValueError(
                    f"emitted token {place} ({token}) is no child of the path's node, so it is "
                    "the step's correction or bonus, yet tokens follow it: an emitted block is "
                    f"accepted nodes along one path, then one token; got {list(emitted)} (pass "
                    "path= if a later sibling with an earlier one's token was accepted)."
                )
            break
        path.append(node)
    return tuple(path)


def tree_walk(
    parents: tuple[int, ...],
    drafted: tuple[int, ...],
    emitted: tuple[int, ...],
    path: tuple[int, ...] | None = None,
) -> TreeWalk:
    """The walk of a step that drafted ``drafted`` on the tree ``parents``, accepted the nodes
    ``path`` (``None``: read from the tokens, ``read_path``) and emitted ``emitted``.

    Raises:
        ValueError: no emitted token; a path that is not one (each node a child of the one
        before, the first a child of the root), whose tokens are not the emitted ones, or
        whose length is not the emitted tokens' (a cut step) or one less.

    Example:
        >>> walk = tree_walk((-1, -1, 0), (4, 5, 6), (5, 2))  # node 0 rejected, 1 accepted
        >>> walk.path, walk.examined, walk.visited, walk.ending  # node 1 is a leaf: a bonus
        ((1,), ((0, False), (1, True)), (-1, 1), 'bonus')
    """
    if not emitted:
        raise ValueError("emitted must hold at least one token, got none.")
    path = read_path(parents, drafted, emitted) if path is None else tuple(path)
    children, node = _children(parents), -1
    examined: list[tuple[int, bool]] = []
    if len(path) not in (len(emitted) - 1, len(emitted)):
        raise ValueError(f"path must hold one node per accepted token: {len(emitted)} or "
                         f"{len(emitted) - 1} nodes, got {list(path)}.")  # fmt: skip
    for place, chosen in enumerate(path):
        kids = children.get(node, [])
        if chosen not in kids or drafted[chosen] != emitted[place]:
            raise ValueError(
                f"path[{place}] = {chosen} must be a child of node {node} carrying the emitted "
                f"token {emitted[place]}; its children are {kids}, got path {list(path)}."
            )
        examined.extend((kid, kid == chosen) for kid in kids[: kids.index(chosen) + 1])
        node = chosen
    visited = (-1, *path)[: len(emitted)]
    if len(path) == len(emitted):
        return TreeWalk(path, tuple(examined), visited, "cut")
    kids = children.get(node, [])
    examined.extend((kid, False) for kid in kids)
    return TreeWalk(path, tuple(examined), visited, "correction" if kids else "bonus")


@dataclass(frozen=True)
class TreeStepRecord:
    """One tree step of one sequence, in scalars (``tree_record``'s table).

    Attributes:
        position: offset of the step's first emitted token in the sequence's new tokens.
        parents: the tree: each node's parent (``-1``: the root), as ``TokenTree.parents``.
        drafted: each node's token (``n``).
        emitted: the accepted nodes' tokens along the path, then the correction or bonus
            (none after a cut).
        path: the accepted nodes, from the root's child down.
        draft_below, draft_at, draft_above: each node's token under its parent's draft row:
            mass before it by token id, at it, before it by decreasing probability.
        residual_at: per examined child (``walk.examined`` order), the running residual's
            mass at its token when it was examined.
        final_below, final_at, final_above: the last token under its law (the residual after
            every child of the last visited node was rejected, or the leaf's target row);
            ``None`` for a cut step.
        target_argmax, top_ids, top_values, projections: the sketch of each visited node's
            target row (``walk.visited``), one row per emitted token.

    Raises:
        ValueError: a tree ``TokenTree`` refuses, lengths that do not fit it, an emitted block
            that is not a path (``tree_walk``), final fields present for a cut step or
            missing otherwise.
    """

    position: int
    parents: tuple[int, ...]
    drafted: tuple[int, ...]
    emitted: tuple[int, ...]
    path: tuple[int, ...]
    draft_below: tuple[float, ...]
    draft_at: tuple[float, ...]
    draft_above: tuple[float, ...]
    residual_at: tuple[float, ...]
    final_below: float | None
    final_at: float | None
    final_above: float | None
    target_argmax: tuple[int, ...]
    top_ids: tuple[tuple[int, ...], ...]
    top_values: tuple[tuple[float, ...], ...]
    projections: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        TokenTree(self.parents, "iid")  # raises on a malformed tree
        n = len(self.parents)
        for name in ("drafted", "draft_below", "draft_at", "draft_above"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} must hold n = {n} values (one per node), got "
                                 f"{len(getattr(self, name))}.")  # fmt: skip
        walk = self.walk
        if len(self.residual_at) != len(walk.examined):
            raise ValueError(f"residual_at must hold one value per examined child "
                             f"({len(walk.examined)}), got {len(self.residual_at)}.")  # fmt: skip
        rows = len(walk.visited)
        for name in ("target_argmax", "top_ids", "top_values", "projections"):
            if len(getattr(self, name)) != rows:
                raise ValueError(f"{name} must hold one row per visited node ({rows}), got "
                                 f"{len(getattr(self, name))}.")  # fmt: skip
        finals = (self.final_below, self.final_at, self.final_above)
        if (walk.ending == "cut") != all(value is None for value in finals) or (
            walk.ending != "cut" and any(value is None for value in finals)
        ):
            raise ValueError(
                "final_below, final_at and final_above must be None exactly for a cut step; "
                f"this step ends by {walk.ending}, got {finals}."
            )

    @functools.cached_property
    def walk(self) -> TreeWalk:
        """The path the step took (``tree_walk``), computed once."""
        return tree_walk(self.parents, self.drafted, self.emitted, self.path)

    @property
    def rule(self) -> str:
        """``"tree"``: recursive rejection sampling of i.i.d. children at each node."""
        return "tree"

    @property
    def k(self) -> int:
        """Nodes drafted."""
        return len(self.drafted)

    @property
    def accepted(self) -> int:
        """Nodes accepted along the path."""
        return sum(accept for _, accept in self.walk.examined)

    @property
    def ending(self) -> str:
        """``"correction"``, ``"bonus"`` or ``"cut"`` (``TreeWalk.ending``)."""
        return self.walk.ending
