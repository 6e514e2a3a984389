"""``generate_speculative(..., record=True)``: specdec's own loop records its steps as a ``Trace``.

The recorded values are checked against rows recomputed independently (each model
teacher-forced on the record's prefix and drafts, float64 toy models: equal to 1e-12); the
trace of a correct loop is LOSSLESS through the door, and the trace of a loop given a rule
that draws the correction from ``p`` is LOSSY (its corrections land where the residual is 0:
a forbidden outcome, deterministic given the seeds), as are the loop's traces given a reused
uniform, a bonus at another temperature and ``q`` at temperature 1 (each from the trace and
from its file). Family-wise false-fail 0.01.
"""

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor

from specdec.cli import main
from specdec.generate import Generation, generate_speculative
from specdec.models.base import empty_context, extend
from specdec.models.toy import make_toy_pair
from specdec.models.toy_lm import ToyLM
from specdec.sampling import sample
from specdec.stopping import StopBelow
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.step_record import Trace, declare_rule, save_trace
from specdec.types import Verification
from specdec.verify.block import verify_block
from specdec.verify.rules import exact_match_rule
from specdec.verify.tokens import verify_tokens
from specdec.warp import SamplingOptions

VOCAB = 6
PAIR = make_toy_pair(VOCAB, seed=0)
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
LEVEL = AuditOptions(false_fail_rate=0.01, min_power_tv=0.5)


def _run(*, batch: int = 8, new: int = 40, temperature: float = 0.8, **kw: object) -> Generation:
    prompts = torch.tensor([[1 + row % 3, 2] for row in range(batch)])
    generators = [torch.Generator().manual_seed(row) for row in range(batch)]
    return generate_speculative(
        TARGET, DRAFT, prompts, k=3, max_new_tokens=new, generator=generators,
        temperature=temperature, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture(scope="module")
def correct() -> Generation:
    return _run(record=True)


def _row(model: ToyLM, law: SamplingOptions, ids: list[int]) -> Tensor:
    logits, _ = extend(model, empty_context(1), torch.tensor([ids]), logits_to_keep=1)
    return law.probs(logits[0, -1])


def test_the_recorded_values_are_the_rows_the_models_give() -> None:
    law = SamplingOptions(temperature=0.8)
    out = _run(batch=6, new=13, record=True, stopping=StopBelow(0.4), eos_token_id=5)
    trace = out.trace
    assert isinstance(trace, Trace) and trace.law == law and trace.rule == "token"
    lengths = {record.k for steps in trace.sequences for record in steps}
    assert len(lengths) > 1  # blocks of different lengths were verified together
    for row, steps in enumerate(trace.sequences):
        new: list[int] = []
        for record in steps:
            assert record.position == len(new)
            prefix = [*trace.prompts[row], *new]
            for i in range(record.k + 1):
                ids = [*prefix, *record.drafted[:i]]
                target_row = _row(TARGET, law, ids)
                assert record.top_values[i][0] == pytest.approx(float(target_row.max()), abs=1e-12)
                assert record.target_argmax[i] == int(target_row.argmax())
                if i < record.k:
                    token = record.drafted[i]
                    draft_row = _row(DRAFT, law, ids)
                    assert record.draft_at[i] == pytest.approx(float(draft_row[token]), abs=1e-12)
                    assert record.target_at[i] == pytest.approx(float(target_row[token]), abs=1e-12)
            new.extend(record.emitted)
        written = [t for t in out.tokens[row].tolist() if t >= 0]
        assert new == written[: len(new)] and len(written) - len(new) <= 1  # the last: no drafts


def test_recording_changes_no_token_and_greedy_is_recorded_at_temperature_0() -> None:
    for temperature in (0.8, 0.0):
        plain = _run(batch=3, new=12, temperature=temperature)
        recorded = _run(batch=3, new=12, temperature=temperature, record=True)
        assert torch.equal(plain.tokens, recorded.tokens) and plain.trace is None
    assert recorded.trace is not None and recorded.trace.rule == "greedy"
    assert audit(as_subject(recorded.trace), LEVEL).verdict == "lossless"
    with pytest.raises(TypeError, match="record must be a bool"):
        _run(batch=1, new=2, record=1)


def test_a_correct_loop_is_lossless_from_its_trace(correct: Generation) -> None:
    assert correct.trace is not None
    report = audit(as_subject(correct.trace), LEVEL)
    assert report.verdict == "lossless", report.headline()


def _correction_from_p(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """A planted bug: token-level rejection, but the correction drawn from ``p_j``."""
    verdict = verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
    k, accepted = draft_tokens.shape[-1], verdict.num_accepted
    row = target_probs.gather(-2, accepted[:, None, None].expand(-1, 1, target_probs.shape[-1]))
    wrong = sample(row[:, 0], uniforms[:, k])  # from p_j, not the residual
    last = verdict.tokens.gather(1, accepted[:, None])[:, 0]  # the correction or the bonus
    tokens = verdict.tokens.scatter(
        1, accepted[:, None], torch.where(accepted < k, wrong, last)[:, None]
    )
    return Verification(num_accepted=accepted, tokens=tokens)


def test_a_loop_given_a_correction_from_p_is_lossy_from_its_trace() -> None:
    out = _run(record=True, rule=declare_rule(_correction_from_p, "token"))
    assert out.trace is not None
    report = audit(as_subject(out.trace), LEVEL)
    assert report.verdict == "lossy", report.headline()
    assert "forbidden outcome" in (report.scenarios[0].deciding_test or "")


def test_a_loop_verifying_with_verify_block_records_the_block_rule() -> None:
    plain = _run(batch=3, new=12, rule=verify_block)
    small = _run(batch=3, new=12, rule=verify_block, record=True)
    assert torch.equal(plain.tokens, small.tokens)
    out = _run(rule=verify_block, record=True)
    assert out.trace is not None and out.trace.rule == "block"
    assert max(len(r.block_excess) for steps in out.trace.sequences for r in steps) == 2  # k - 1
    report = audit(as_subject(out.trace), LEVEL)
    assert report.verdict == "lossless", report.headline()


def _block_with_token_residual(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """A planted bug: block verification's accepted length, then the correction drawn from
    token-level rejection's residual ``max(0, p - q)`` (the block's is ``max(0, w p - q)``)."""
    verdict = verify_block(draft_tokens, draft_probs, target_probs, uniforms)
    k, accepted = draft_tokens.shape[-1], verdict.num_accepted
    rows = torch.arange(accepted.shape[0])
    excess = target_probs[rows, accepted] - draft_probs[rows, accepted.clamp(max=k - 1)]
    excess = excess.clamp(min=0.0) + 1e-300  # never all 0
    wrong = sample(excess / excess.sum(-1, keepdim=True), uniforms[:, k])
    last = torch.where(accepted < k, wrong, verdict.tokens[rows, accepted])
    tokens = verdict.tokens.scatter(1, accepted[:, None], last[:, None])
    return Verification(num_accepted=accepted, tokens=tokens)


def test_a_loop_given_a_block_rule_with_the_token_residual_is_lossy_from_its_trace() -> None:
    rule = declare_rule(_block_with_token_residual, "block")
    out = _run(record=True, rule=rule, draft_temperature=1.5)  # a far draft: w_tau well below 1
    assert out.trace is not None and out.trace.rule == "block"
    report = audit(as_subject(out.trace), LEVEL)
    assert report.verdict == "lossy", report.headline()
    assert "forbidden outcome" in (report.scenarios[0].deciding_test or "")


def test_a_rule_whose_step_law_is_not_known_is_refused_before_the_first_step() -> None:
    with pytest.raises(ValueError, match=r"step law is not known\..*declare_rule"):
        _run(batch=1, new=4, record=True, rule=exact_match_rule)
    with pytest.raises(ValueError, match="name must be one of"):
        declare_rule(_block_with_token_residual, "greedy")
    greedy = _run(batch=1, new=4, temperature=0.0, record=True, rule=exact_match_rule)
    assert greedy.trace is not None and greedy.trace.rule == "greedy"


def _reused_uniform(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """A planted bug: one uniform for every draft of the step (the last still samples)."""
    k = draft_tokens.shape[-1]
    shared = torch.cat([uniforms[:, :1].expand(-1, k), uniforms[:, k:]], dim=1)
    return verify_tokens(draft_tokens, draft_probs, target_probs, shared)


def _bonus_hotter(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """A planted bug: the bonus drawn at twice the temperature (its row ``p^(1/2)``)."""
    hot = target_probs[:, -1:] ** 0.5
    rows = torch.cat([target_probs[:, :-1], hot / hot.sum(-1, keepdim=True)], dim=1)
    return verify_tokens(draft_tokens, draft_probs, rows, uniforms)


def _q_unwarped(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """A planted bug: verifying with the draft's rows at temperature 1 (``q^T``), while the
    drafts were sampled from the rows at ``T = 0.8`` (the rows the loop records)."""
    raw = draft_probs**0.8
    return verify_tokens(draft_tokens, raw / raw.sum(-1, keepdim=True), target_probs, uniforms)


@pytest.mark.parametrize(
    ("rule", "k", "test"),
    [
        (_reused_uniform, 3, "acceptance after acceptance (coupled LR)"),
        (_bonus_hotter, 1, "bonus tokens (tilted LR)"),
        (_q_unwarped, 3, "forbidden outcome"),
    ],
    ids=["reused_uniform", "bonus_temperature", "q_unwarped"],
)
def test_the_field_s_bugs_in_the_loop_are_lossy_from_its_trace_and_its_file(
    rule: Callable[..., Verification],
    k: int,
    test: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each bug planted in specdec's own loop (8 rows, 40 new tokens, T = 0.8): LOSSY from
    the loop's record at false-fail 0.01, by the process named, and from the recorded file
    through ``specdec audit --trace``."""
    prompts = torch.tensor([[1 + row % 3, 2] for row in range(8)])
    out = generate_speculative(
        TARGET, DRAFT, prompts, k=k, max_new_tokens=40, temperature=0.8, record=True,
        generator=[torch.Generator().manual_seed(row) for row in range(8)],
        rule=declare_rule(rule, "token"),
    )  # fmt: skip
    assert out.trace is not None
    report = audit(as_subject(out.trace), LEVEL)
    assert report.verdict == "lossy" and test in (report.scenarios[0].deciding_test or ""), (
        report.format()
    )
    path = tmp_path / "loop.jsonl"
    save_trace(path, out.trace)
    argv = ["audit", "--trace", str(path), "--false-fail-rate", "0.01", "--min-power-tv", "0.5"]
    assert main([*argv, "--quiet"]) == 1
    assert "LOSSY" in capsys.readouterr().out
