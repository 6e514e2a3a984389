"""``specdec.testing.step_record``: the recorded scalars, exactly, on a toy V; the file's round
trip; errors on bad input."""

import json
import math
from pathlib import Path

import pytest
import torch

from specdec.testing._step_scalars import TILTS
from specdec.testing.step_record import Trace, load_trace, record_step, save_trace
from specdec.testing.trace_zoo import toy_trace
from specdec.warp import SamplingOptions

DRAFT = torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]], dtype=torch.float64)
TARGET = torch.tensor([[0.25, 0.5, 0.25], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]], dtype=torch.float64)


def test_a_correction_records_the_residual_masses_in_token_id_order() -> None:
    # x_1 = 0 (q 0.5, p 0.25), rejected; residual max(0, p_1 - q_1) = [0, 0.25, 0]: y = 1.
    record = record_step(torch.tensor([0, 2]), torch.tensor([1]), DRAFT, TARGET, position=3)
    assert (record.accepted, record.ending, record.position) == (0, "correction", 3)
    assert record.draft_at == (0.5, 0.5) and record.draft_below == (0.0, 0.5)
    assert record.draft_above == (0.0, 0.0)  # each draft is its row's most likely token
    assert record.target_at == (0.25, 0.3)
    assert (record.final_below, record.final_at, record.final_above) == (0.0, 1.0, 0.0)
    assert record.residual_mass == 0.25
    assert record.target_argmax == (1, 1, 2)
    assert record.top_ids[2] == (2, 0, 1)  # ties by lower id: 0 before 1
    assert len(record.projections) == 3 and len(record.projections[0]) == 4


def test_a_bonus_records_the_bonus_row_and_a_cut_step_nothing_final() -> None:
    record = record_step(torch.tensor([0, 2]), torch.tensor([0, 2, 1]), DRAFT, TARGET)
    assert (record.accepted, record.ending, record.residual_mass) == (2, "bonus", None)
    assert (record.final_below, record.final_at, record.final_above) == (0.3, 0.3, 0.7)
    cut = record_step(torch.tensor([0, 2]), torch.tensor([0]), DRAFT, TARGET)
    assert (cut.accepted, cut.ending, cut.final_at) == (1, "cut", None)
    greedy = record_step(torch.tensor([1, 1]), torch.tensor([1, 1, 2]), DRAFT, TARGET,
                         rule="greedy")  # fmt: skip
    assert greedy.final_at is None and greedy.ending == "bonus"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((torch.tensor([0]), torch.tensor([1]), DRAFT, TARGET), r"drafted must have shape \[k\]"),
        ((torch.tensor([0, 2]), torch.tensor([2, 1]), DRAFT, TARGET), "emitted must be accepted"),
        ((torch.tensor([0, 2]), torch.tensor([1]), DRAFT[:1], TARGET), "draft_probs must have"),
        ((torch.tensor([0, 5]), torch.tensor([1]), DRAFT, TARGET), r"ids in \[0, 3\)"),
        ((torch.tensor([0, 2]), torch.tensor([1]), DRAFT * 2, TARGET), "sum to 1"),
        ((torch.tensor([0, 2]), torch.tensor([], dtype=torch.int64), DRAFT, TARGET), "1 <= m"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(arguments: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        record_step(*arguments)


def test_an_unknown_rule_and_a_float_token_are_refused() -> None:
    with pytest.raises(ValueError, match="rule must be one of"):
        record_step(torch.tensor([0, 2]), torch.tensor([1]), DRAFT, TARGET, rule="typical")
    with pytest.raises(TypeError, match="drafted must be an integer tensor"):
        record_step(torch.tensor([0.0, 2.0]), torch.tensor([1]), DRAFT, TARGET)


def test_a_trace_reads_back_bit_for_bit(tmp_path: Path) -> None:
    trace = toy_trace(steps=6, k=2, vocab=5)
    path = tmp_path / "run.jsonl"
    save_trace(path, trace)
    assert load_trace(path) == trace
    header = json.loads(path.read_text().splitlines()[0])
    assert (header["format"], header["version"], header["vocab"]) == ("specdec-trace", 1, 5)


def test_a_malformed_file_names_its_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    save_trace(path, toy_trace(steps=2, k=2, vocab=5))
    lines = path.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["drafted"] = [0.5]
    path.write_text("\n".join([lines[0], json.dumps(entry)]) + "\n")
    with pytest.raises(ValueError, match="line 2: drafted must be a list of ints"):
        load_trace(path)
    path.write_text(lines[0].replace('"version": 1', '"version": 9') + "\n")
    with pytest.raises(ValueError, match="version 9 is not supported"):
        load_trace(path)
    path.write_text("hello\n")
    with pytest.raises(ValueError, match="not JSON"):
        load_trace(path)


def test_a_trace_refuses_overlapping_steps_and_a_mixed_rule() -> None:
    record = record_step(torch.tensor([0, 2]), torch.tensor([0, 2, 1]), DRAFT, TARGET)
    with pytest.raises(ValueError, match="overlaps the step before"):
        Trace(SamplingOptions(), 3, "token", ((0,),), ((record, record),))
    with pytest.raises(ValueError, match="rule 'token', the trace's is 'greedy'"):
        Trace(SamplingOptions(), 3, "greedy", ((0,),), ((record,),))


def test_the_tilt_norms_are_each_laws_log_sum_of_powers_and_weigh_to_one() -> None:
    """``ln sum pi^b`` per exponent, for the draft rows and the last token's law; under each
    law ``sum_y pi(y) * pi(y)^(b-1) / Z(b) = 1``: each tilted likelihood ratio is an e-value."""
    record = record_step(torch.tensor([0, 2]), torch.tensor([0, 2, 1]), DRAFT, TARGET)
    assert len(record.draft_tilts) == 2 and record.final_tilts is not None
    for row, norms in ((DRAFT[0], record.draft_tilts[0]), (TARGET[2], record.final_tilts)):
        for b, norm in zip(TILTS, norms, strict=True):
            assert norm == pytest.approx(float((row**b).sum().log()), rel=1e-12)
            assert float((row * row ** (b - 1) / math.exp(norm)).sum()) == pytest.approx(1.0)
    residual = record_step(torch.tensor([0, 2]), torch.tensor([1]), DRAFT, TARGET)
    assert residual.final_tilts == pytest.approx((0.0,) * len(TILTS))  # a point mass: Z = 1
    cut = record_step(torch.tensor([0, 2]), torch.tensor([0]), DRAFT, TARGET)
    assert cut.final_tilts is None and len(cut.draft_tilts) == 2


def test_a_file_without_tilts_still_loads_and_one_with_other_tilts_is_refused(
    tmp_path: Path,
) -> None:
    trace = toy_trace(steps=4, k=2, vocab=5)
    path = tmp_path / "run.jsonl"
    save_trace(path, trace)
    lines = path.read_text().splitlines()
    older = [lines[0]] + [
        json.dumps({k: v for k, v in json.loads(line).items() if "tilts" not in k})
        for line in lines[1:]
    ]
    (tmp_path / "old.jsonl").write_text("\n".join(older) + "\n")
    loaded = load_trace(tmp_path / "old.jsonl")
    assert all(s.draft_tilts == () and s.final_tilts is None for q in loaded.sequences for s in q)
    header = json.loads(lines[0])
    header["sketch"]["tilts"] = [0.5, 2.0]
    (tmp_path / "other.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"recorded with tilts \[0.5, 2.0\]"):
        load_trace(tmp_path / "other.jsonl")
