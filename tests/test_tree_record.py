"""``specdec.testing.tree_record``: a tree step's record, its walk, its file form.

Hand-computed records first (recursive rejection of i.i.d. children, the residual updated
after each rejected sibling), then the checks, the trace's rule, the file round trip and the
comparison of a tree trace's visited rows with the target's teacher-forced rows.
"""

from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch

from specdec import TokenTree, verify_tree
from specdec.models.toy import make_toy_pair
from specdec.models.toy_lm import ToyLM
from specdec.testing.audit.judging.trace_teacher import compare_target_rows
from specdec.testing.step_record import Trace, load_trace, record_step, save_trace
from specdec.testing.tree_record import TreeStepRecord, read_path, record_tree_step, tree_walk
from specdec.testing.tree_trace_zoo import toy_tree_trace
from specdec.warp import SamplingOptions

STAR = TokenTree(parents=(-1, -1), draw="iid")  # two i.i.d. children of the root
DRAFT = torch.tensor([[0.5, 0.25, 0.25]] * 3, dtype=torch.float64)
TARGET = torch.tensor([[0.25, 0.5, 0.25]] * 3, dtype=torch.float64)


def _step(
    emitted: list[int], drafted: list[int], tree: TokenTree = STAR, position: int = 0
) -> TreeStepRecord:
    ids = torch.tensor(drafted)
    return record_tree_step(tree, ids, torch.tensor(emitted), DRAFT, TARGET, position=position)


def test_a_rejected_sibling_updates_the_residual_the_next_one_is_tested_against() -> None:
    # Node 0 (token 0): alpha = min(1, 0.25 / 0.5); rejected, p_2 = norm(max(0, p - q)) =
    # (0, 1, 0); node 1 (token 1): alpha = min(1, 1 / 0.25) = 1, accepted; a leaf: bonus 2.
    record = _step([1, 2], [0, 1])
    assert record.walk.examined == ((0, False), (1, True)) and record.path == (1,)
    assert record.residual_at == (0.25, 1.0) and record.ending == "bonus"
    assert (record.final_below, record.final_at, record.final_above) == (0.75, 0.25, 0.75)
    assert record.draft_at == (0.5, 0.25) and record.draft_below == (0.0, 0.5)
    assert record.draft_above == (0.0, 0.5) and record.accepted == 1
    assert len(record.top_ids) == 2  # the root's row and node 1's row: one per emitted token
    # Two duplicates (token 0): the second is tested against p_2(0) = 0; the correction is
    # drawn from p_3 = norm(max(0, p_2 - q)) = (0, 1, 0).
    both = _step([1], [0, 0])
    assert both.residual_at == (0.25, 0.0) and both.ending == "correction"
    assert (both.final_below, both.final_at) == (0.0, 1.0)


def test_the_walk_reads_the_path_from_the_tokens_or_takes_the_engines() -> None:
    parents, drafted = (-1, -1, 0, 0), (3, 3, 1, 2)
    assert read_path(parents, drafted, (3, 2, 0)) == (0, 3)  # the first child carrying 3
    walk = tree_walk(parents, drafted, (3, 2, 0))
    assert walk.examined == ((0, True), (2, False), (3, True)) and walk.visited == (-1, 0, 3)
    assert tree_walk(parents, drafted, (3, 4)).ending == "correction"
    assert tree_walk(parents, drafted, (3, 1)).ending == "cut"  # ends on an accepted node
    later = tree_walk(parents, drafted, (3, 0), (1,))  # the engine accepted the second 3
    assert later.examined == ((0, False), (1, True)) and later.ending == "bonus"
    with pytest.raises(ValueError, match="yet tokens follow it"):
        read_path(parents, drafted, (4, 1))
    with pytest.raises(ValueError, match=r"path\[0\] = 2 must be a child of node -1"):
        tree_walk(parents, drafted, (1, 0), (2,))
    with pytest.raises(ValueError, match="one node per accepted token"):
        tree_walk(parents, drafted, (3,), (0, 2, 3))


def test_a_cut_step_keeps_no_final_token_and_the_rows_of_its_decisions() -> None:
    tree = TokenTree(parents=(-1, 0), draw="iid")
    record = _step([0, 1], [0, 1], tree)  # both accepted, then cut (an EOS or the budget)
    assert record.ending == "cut" and record.final_at is None and record.walk.visited == (-1, 0)
    assert len(record.residual_at) == 2 and len(record.projections) == 2


def test_the_record_agrees_with_verify_tree_and_does_not_grow_with_the_vocabulary() -> None:
    generator = torch.Generator().manual_seed(0)
    tree = TokenTree(parents=(-1, -1, 0, 1), draw="iid")
    tokens = torch.tensor([0, 0, 1, 2])
    sizes = set()
    for vocab, uniform in ((300, 0.0), (3000, 0.0), (300, 0.9)):
        draft = torch.softmax(torch.randn(5, vocab, generator=generator), -1).double()
        target = torch.softmax(torch.randn(5, vocab, generator=generator), -1).double()
        out = verify_tree(tree, tokens, draft, target, torch.full((5,), uniform).double())
        count = int(out.num_accepted)
        record = record_tree_step(tree, tokens, out.tokens[: count + 1], draft, target)
        assert record.path == tuple(out.path[:count].tolist())
        given = record_tree_step(tree, tokens, out.tokens[: count + 1], draft, target,
                                 path=out.path)  # fmt: skip
        assert given == record
        if uniform == 0.0:  # the same walk (first children accepted): the same size
            values = [getattr(record, field.name) for field in fields(record)]
            flat = [w for v in values for w in (v if isinstance(v, tuple) else (v,))]
            sizes.add(sum(len(w) if isinstance(w, tuple) else 1 for w in flat))
    assert len(sizes) == 1


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"i\.i\.d\. children"):
        _step([1, 2], [0, 1], TokenTree(parents=(-1, -1), draw="without_replacement"))
    with pytest.raises(TypeError, match=r"tree must be a specdec\.TokenTree"):
        record_tree_step((-1, -1), torch.tensor([0, 1]), torch.tensor([1]), DRAFT, TARGET)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"drafted must have shape \[n\]"):
        _step([1], [0, 1, 2])
    with pytest.raises(ValueError, match="depth\\+1 = 2"):
        _step([1, 2, 2], [0, 1])
    with pytest.raises(ValueError, match="position must be an int >= 0"):
        _step([1, 2], [0, 1], position=-1)
    with pytest.raises(ValueError, match="record_tree_step"):
        record_step(torch.tensor([0]), torch.tensor([1]), DRAFT[:1], TARGET[:2], rule="tree")


def test_a_trace_holds_one_kind_of_record_per_rule() -> None:
    tree_step = _step([1, 2], [0, 1])
    token_step = record_step(torch.tensor([0]), torch.tensor([1]), DRAFT[:1], TARGET[:2])
    law = SamplingOptions()
    assert Trace(law, 3, "tree", ((0,),), ((tree_step,),)).steps == 1
    with pytest.raises(ValueError, match="rule 'tree', the trace's is 'token'"):
        Trace(law, 3, "token", ((0,),), ((tree_step,),))
    with pytest.raises(ValueError, match="the tree rule takes TreeStepRecord s only"):
        Trace(law, 3, "tree", ((0,),), ((replace(token_step, rule="tree"),),))


def test_a_tree_trace_reads_back_bit_for_bit(tmp_path: Path) -> None:
    trace = toy_tree_trace("residual_not_updated", steps=12, seed=3)
    path = tmp_path / "tree.jsonl"
    save_trace(path, trace)
    assert load_trace(path) == trace
    lines = path.read_text().splitlines()
    assert '"rule": "tree"' in lines[0] and '"residual_at"' in lines[1]
    path.write_text("\n".join([lines[0], lines[1].replace('"path"', '"route"')]) + "\n")
    with pytest.raises(ValueError, match="line 2: a step needs the keys"):
        load_trace(path)


def _model_tree_trace(temperature_claimed: float) -> Trace:
    """A tree engine on toy models at temperature 1: each node drawn from the draft's row at
    its parent's context, the rows the models' at each context."""
    pair = make_toy_pair(5, seed=1)
    tree = TokenTree(parents=(-1, -1, 0), draw="iid")
    generator = torch.Generator().manual_seed(0)
    sequence: list[int] = []
    records = []
    for _ in range(6):
        contexts = [[1, *sequence]]  # the root's, then each node's
        tokens = []
        for parent in tree.parents:
            row = pair.draft.float_probs(torch.tensor([contexts[parent + 1]]))[0]
            tokens.append(int(torch.multinomial(row, 1, generator=generator)))
            contexts.append([*contexts[parent + 1], tokens[-1]])
        draft = torch.cat([pair.draft.float_probs(torch.tensor([c])) for c in contexts])
        target = torch.cat([pair.target.float_probs(torch.tensor([c])) for c in contexts])
        noise = torch.rand(4, generator=generator, dtype=torch.float64)
        out = verify_tree(tree, torch.tensor(tokens), draft, target, noise)
        emitted = out.tokens[: int(out.num_accepted) + 1]
        records.append(record_tree_step(tree, torch.tensor(tokens), emitted, draft, target,
                                        position=len(sequence)))  # fmt: skip
        sequence += emitted.tolist()
    return Trace(SamplingOptions(temperature=temperature_claimed), 5, "tree", ((1,),),
                 (tuple(records),))  # fmt: skip


def test_the_visited_rows_are_checked_against_the_teacher_forced_target() -> None:
    target = ToyLM(make_toy_pair(5, seed=1).target)
    trace = _model_tree_trace(1.0)
    right = compare_target_rows(trace, target)
    assert right.passed and right.rows == sum(len(r.emitted) for r in trace.sequences[0])
    assert right.skipped == 0
    wrong = compare_target_rows(replace(trace, law=SamplingOptions(temperature=0.5)), target)
    assert not wrong.passed and "sequence 0, step at position" in wrong.where
