"""The block verification rule in the step record and its judge (``rule="block"``).

The record's scalars are checked exactly on the paper's binary example; the law the judge
reads off a record (each accepted-length decision, then the block residual) is checked against
``specdec.verify_block``'s own frequencies on one fixed step (20,000 draws, 5 standard errors);
``trace_zoo_block``'s correct engine is LOSSLESS and its planted bugs, and a block trace
declared as token-level, are LOSSY within the steps stated, at family-wise false-fail 0.01.
"""

from pathlib import Path

import pytest
import torch

from specdec.cli import main
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.audit.running.trace_block import block_chances, block_thresholds_of
from specdec.testing.step_record import Trace, load_trace, record_step, save_trace
from specdec.testing.trace_zoo import judged_alone
from specdec.testing.trace_zoo_block import block_trace
from specdec.verify.block import block_thresholds, block_weights, verify_block
from specdec.warp import SamplingOptions

LEVEL = AuditOptions(false_fail_rate=0.01, min_power_tv=0.5)
Q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=torch.float64)  # the paper's example, k = 2
P = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=torch.float64)
SETTINGS = {"k": 4, "draft_noise": 2.5, "temperature": 1.0}


@pytest.fixture(scope="module")
def correct() -> Trace:
    return block_trace("none", steps=200, seed=0, **SETTINGS)


def test_the_paper_example_keeps_both_drafts_surely_and_forbids_the_rest() -> None:
    # x = (0, 1): w_1 = 1/2, Z_1 = sum max(0, p/2 - q) = 0, so h_1 = 0; w_2 = h_2 = 1.
    bonus = record_step(torch.tensor([0, 1]), torch.tensor([0, 1, 0]), Q, P, rule="block")
    assert bonus.block_excess == (0.0,) and bonus.final_at == pytest.approx(1 / 3)
    assert block_thresholds_of(bonus) == [0.0, 1.0] and block_chances(bonus) == [1.0, 1.0]
    assert audit(as_subject(Trace(SamplingOptions(), 2, "block", ((0,),), ((bonus,),))),
                 LEVEL).verdict != "lossy"  # fmt: skip
    # Ending at tau = 1 (a correction after x_1) has probability 0, and so has its token.
    ended = record_step(torch.tensor([0, 1]), torch.tensor([0, 0]), Q, P, rule="block")
    assert (ended.ending, ended.final_at, ended.residual_mass) == ("correction", 0.0, 0.0)
    report = audit(as_subject(Trace(SamplingOptions(), 2, "block", ((0,),), ((ended,),))), LEVEL)
    assert report.verdict == "lossy"
    assert "the block ends before draft 2 though the block rule keeps it surely" in report.format()
    assert record_step(torch.tensor([0, 1]), torch.tensor([0, 0]), Q, P).block_excess == ()
    none = torch.zeros(0, dtype=torch.int64)  # a step with no draft: the bonus row alone
    assert record_step(none, torch.tensor([1]), Q[:0], P[:1], rule="block").final_at == 2 / 3


def _step_rows() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step with every accepted length and several corrections likely: ``k = 3``, V = 4."""
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    target = logits.softmax(-1)
    draft = logits[:3] + 1.5 * torch.randn(3, 4, generator=generator, dtype=torch.float64)
    return torch.tensor([1, 2, 0]), draft.softmax(-1), target


def test_the_judged_law_is_verify_blocks_own() -> None:
    drafted, draft, target = _step_rows()
    record = record_step(drafted, drafted[:1], draft, target, rule="block")  # any outcome
    weights = block_weights(target[:3].gather(1, drafted[:, None])[:, 0],
                            draft.gather(1, drafted[:, None])[:, 0])  # fmt: skip
    expected = block_thresholds(weights, draft, target).tolist()
    assert block_thresholds_of(record) == pytest.approx(expected, abs=1e-15)
    chances = [*block_chances(record), 0.0]
    count = 20_000
    uniforms = torch.rand(count, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    verdict = verify_block(drafted.expand(count, 3), draft.expand(count, 3, 4),
                           target.expand(count, 4, 4), uniforms)  # fmt: skip
    reach = 1.0
    for tau in range(4):
        law = reach * (1.0 - chances[tau])  # P(tau): kept tau times, then ended
        reach *= chances[tau]
        ended = verdict.num_accepted == tau
        assert abs(float(ended.double().mean()) - law) <= 5 * (law * (1 - law) / count) ** 0.5
        last = verdict.tokens[ended, tau]
        for y in range(4):
            emitted = torch.cat([drafted[:tau], torch.tensor([y])])
            if tau < 3 and y == int(drafted[tau]):
                continue  # not a correction: the block would read it as one more draft kept
            at = record_step(drafted, emitted, draft, target, rule="block").final_at
            chance = law * float(at or 0.0)
            seen = float((last == y).double().sum()) / count
            assert abs(seen - chance) <= 5 * (chance * (1 - chance) / count) ** 0.5 + 1e-12


def test_the_correct_block_engine_is_lossless(correct: Trace) -> None:
    report = audit(as_subject(correct), LEVEL)
    assert report.verdict == "lossless", report.headline()
    assert "rule block" in report.format()


@pytest.mark.parametrize(
    ("bug", "steps", "test"),
    [
        ("token_residual", 200, "has probability 0 under the block residual"),
        ("memoryless_weights", 100, "forbidden outcome"),
        ("declared_token", 200, "forbidden outcome"),
    ],
)
def test_each_planted_block_bug_is_lossy_within_the_steps_stated(
    bug: str, steps: int, test: str
) -> None:
    report = audit(as_subject(block_trace(bug, steps=steps, seed=0, **SETTINGS)), LEVEL)
    assert report.verdict == "lossy", report.headline()
    assert test in (report.scenarios[0].deciding_test or ""), report.headline()


def test_false_fails_of_the_correct_block_engine_stay_within_the_nominal_rate() -> None:
    trace = block_trace("none", steps=600, sequences=20, seed=5, **SETTINGS)
    runs = judged_alone(trace, 0.2)  # 20 independent runs of 30 steps
    lossy = sum(decided is not None for decided in runs)
    assert lossy <= 10  # each <= 0.2 (Ville, Bonferroni): 11 of 20 has probability < 6e-4


def test_a_block_trace_reads_back_bit_for_bit_as_version_2(correct: Trace, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    save_trace(path, correct)
    assert load_trace(path) == correct
    lines = path.read_text().splitlines()
    assert '"version": 2' in lines[0] and '"block_excess": [' in lines[1]
    path.write_text(lines[0].replace('"version": 2', '"version": 1') + "\n")
    with pytest.raises(ValueError, match="rule 'block' needs version 2 or later, got version 1"):
        load_trace(path)
    path.write_text("\n".join([lines[0], lines[1].replace('"block_excess"', '"excess"')]) + "\n")
    with pytest.raises(ValueError, match="line 2: a step needs the keys"):
        load_trace(path)


def test_specdec_audit_judges_a_recorded_block_file(
    correct: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    argv = ["audit", "--trace", str(path), "--false-fail-rate", "0.01", "--min-power-tv", "0.5"]
    for trace, code, word in ((correct, 0, "LOSSLESS"),
                              (block_trace("memoryless_weights", steps=100, **SETTINGS), 1,
                               "LOSSY")):  # fmt: skip
        save_trace(path, trace)
        assert main([*argv, "--quiet"]) == code
        out = capsys.readouterr().out
        assert word in out and "rule block" in out
