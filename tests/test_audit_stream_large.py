"""The stream audit's large-vocabulary and two-sample modes (``stream_large``).

The engines are whole speculative loops on a float toy pair with ``V = 2048`` (an order-1
table, seeded: fast to score) from ``tests/_stream_loops.py``, and one loop on a tiny
random-initialised Llama (``V = 2048``, ``tests/_stream_lm_loops.py``). Every audit states its
rates: false-fail ``FALSE_FAIL`` family-wise (Bonferroni over four e-processes, Ville), and
the sample is sized for a binned-PIT TV of ``DETECT`` with false-pass 1e-3
(``streaming.min_detectable_binned_tv``). The planted bugs are far above that size here
(measured binned-PIT TV and mean-z shift in the docstrings); each test checks the planned size
before it asserts.
"""

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, ToyModel, ToyPair
from specdec.testing.audit import ExitCode, audit_stream
from specdec.testing.audit.judging.stream_large import (
    PIT_BINS,
    StreamStatistics,
    add_tokens,
    empty_statistics,
    token_statistics,
)
from specdec.testing.audit.reporting.stream_results import StreamStatisticsResult
from specdec.testing.signatures import batched
from specdec.testing.stats.streaming import min_detectable_binned_tv
from tests._stream_loops import speculative_loop

VOCAB = 2048
FALSE_FAIL = 1e-3
DETECT = 0.1
OPTIONS = specdec.SamplingOptions(temperature=0.7)
FILTERED = specdec.SamplingOptions(temperature=0.7, top_k=20)
PROMPTS = [[1], [2, 3]]


def float_pair(vocab: int, *, seed: int, scale: float, closeness: float) -> ToyPair:
    """An order-1 float toy pair: target rows ``softmax(scale * gaussian)``, draft rows the
    mixture ``closeness * target + (1 - closeness) * other``, seeded."""
    generator = torch.Generator().manual_seed(seed)

    def table() -> Tensor:
        logits = torch.randn(vocab + 1, vocab, generator=generator, dtype=torch.float64)
        return torch.softmax(scale * logits, -1)

    target, other = table(), table()
    draft = closeness * target + (1 - closeness) * other
    return ToyPair(ToyModel.from_table(1, target), ToyModel.from_table(1, draft))


PAIR = float_pair(VOCAB, seed=0, scale=2.5, closeness=0.8)
TARGET = ToyLM(PAIR.target)


def audit(sample: Any, **options: Any) -> Any:
    common: dict[str, Any] = {"prompts": PROMPTS, "new_tokens": 4, "law": OPTIONS}
    common.update(false_fail_rate=FALSE_FAIL)
    return audit_stream(sample, TARGET, **{**common, **options})


def test_planned_size_detects_the_stated_distance() -> None:
    """The default sizing: the tokens drawn detect the binned-PIT TV asked for."""
    report = audit(speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4), detect_tv=DETECT)
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    level = math.log(4 / FALSE_FAIL)
    assert min_detectable_binned_tv(result.tokens, PIT_BINS, level, 1e-3) <= DETECT
    # V^4 > 65536: auto is large (the method statistical, the stream's mode large)
    assert (report.mode, report.stream_mode, report.level) == ("statistical", "large", "stream")
    assert report.verdict == "lossless", report.format()
    assert report.exit_code == ExitCode.LOSSLESS
    assert "no deviation of binned PIT TV" in report.headline()
    assert "cannot see" in report.format() and "equal target probability" in report.reason


REUSED_UNIFORM_KS = 0.0056
"""The reused uniform's deviation on ``PAIR`` at T = 0.7 (first token, 50 contexts, computed
exactly from the rows): per-token TV 0.0064, Kolmogorov-Smirnov distance of the index-order PIT
law 0.0043 at closeness 0.8 (0.0056 at 0.5). With ``V = 2048`` each token's slice of the uniform
is about 1/2048 wide, so reusing it barely moves the law: far below any size a test here can
afford (about 4 million tokens for KS 0.005)."""


def test_reused_uniform_is_below_the_stated_power() -> None:
    """The blind spot, stated: the reused-uniform bug (KS distance about 0.005 here) passes at
    the planned size, whose stated detectable KS distance (0.16) is far above it: the verdict
    claims no more than it checked."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4, bug="reused_uniform")
    report = audit(sample, detect_tv=0.2)
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    stated = dict(result.detectable)["Kolmogorov-Smirnov distance of the PIT law"]
    assert stated > 10 * REUSED_UNIFORM_KS
    assert report.verdict == "lossless"


@pytest.mark.parametrize("bug", ["bonus_unwarped", "q_unwarped"])
def test_planted_bug_is_lossy(bug: str) -> None:
    """Each planted bug in the loop (k = 2, T = 0.7): LOSSY (false-fail 1e-3), stopped by an
    e-process before the planned sample (the planned sample detects binned TV 0.1 with
    false-pass 1e-3)."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4, bug=bug)
    report = audit(sample, detect_tv=DETECT)
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    assert report.verdict == "lossy", report.format()
    assert report.exit_code == ExitCode.LOSSY and result.stopped_early


def test_forbidden_token_is_an_instant_rejection() -> None:
    """An engine that ignores top-k = 20 emits tokens the target forbids: LOSSY by forbidden
    token in the first chunk (probability 0 for a lossless engine)."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4)
    report = audit(sample, law=FILTERED, detect_tv=DETECT)
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    assert report.verdict == "lossy" and result.deciding_test == "forbidden token"
    assert result.forbidden > 0 and result.continuations <= 256 * len(PROMPTS)
    assert "position" in result.first_forbidden


def test_filtered_control_is_lossless() -> None:
    """The same loop honouring top-k = 20: LOSSLESS (false-fail 1e-3, binned TV 0.15)."""
    sample = speculative_loop(PAIR, FILTERED, k=2, new_tokens=4)
    report = audit(sample, law=FILTERED, detect_tv=0.15)
    assert report.verdict == "lossless", report.format()


def test_statistics_state_does_not_grow_with_tokens() -> None:
    """The streamed state: the same tensor shapes after 8 tokens and after 8,000."""
    rows = torch.softmax(torch.randn(8000, 64, generator=torch.Generator().manual_seed(1)), -1)
    rows = rows.double()
    tokens = torch.multinomial(rows, 1, generator=torch.Generator().manual_seed(2))[:, 0]
    uniforms = torch.rand(8000, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    order = torch.randperm(64, generator=torch.Generator().manual_seed(4))
    groups = torch.zeros(8000, 1, dtype=torch.int64)

    def state_after(count: int) -> StreamStatistics:
        per_token = token_statistics(rows[:count], tokens[:count], uniforms[:count], order)
        return add_tokens(empty_statistics(1), per_token, groups[:count])

    small, large = state_after(8), state_after(8000)
    shapes = [tuple(t.shape) for t in vars(small).values() if isinstance(t, Tensor)]
    assert shapes == [tuple(t.shape) for t in vars(large).values() if isinstance(t, Tensor)]
    assert int(large.tokens[0]) == 8000 and int(large.sorted_bins.sum()) == 8000


def test_position_and_prompt_rows() -> None:
    """Every position and prompt has its row; their tokens add up."""
    report = audit(speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4), samples=64)
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    names = [g.name for g in result.groups]
    assert names == ["all tokens", *[f"position {i}" for i in range(1, 5)], "prompt-0", "prompt-1"]
    assert sum(g.tokens for g in result.groups[1:5]) == result.tokens == 64 * 2 * 4


def test_few_samples_cannot_decide() -> None:
    """64 continuations detect only a large binned TV: CANNOT DECIDE (exit 3), saying why."""
    report = audit(speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4), samples=64)
    assert report.verdict == "cannot decide" and report.exit_code == ExitCode.INCONCLUSIVE
    assert "detect only binned PIT TV" in report.headline()


def test_position_kinds_on_a_tiny_llama() -> None:
    """A whole loop on a tiny random-init Llama (V = 2048) with its position-kind hook: rows
    per kind (accepted draft, corrected, bonus), whose tokens add up; 8 continuations cannot
    decide (stated)."""
    from specdec.models import HFModel
    from tests._stream_lm_loops import lm_loop
    from tests._tiny_models import noisy_copy, tiny_model

    model = tiny_model("llama", vocab=VOCAB, seed=0)
    target, draft = HFModel(model), HFModel(noisy_copy(model, scale=0.01, seed=1))
    sample, kinds = lm_loop(target, draft, OPTIONS, k=2, new_tokens=3)
    report = audit_stream(
        sample, model, prompts=[[1, 2, 3]], new_tokens=3, law=OPTIONS, samples=8,
        position_kinds=kinds,
    )  # fmt: skip
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    kinds_rows = {g.name: g.tokens for g in result.groups[-3:]}
    assert set(kinds_rows) <= {"accepted draft", "corrected", "bonus"}
    assert sum(kinds_rows.values()) == result.tokens == 8 * 3
    assert report.verdict == "cannot decide", report.format()


@batched
def _reference(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """Target-only decoding: the engine without speculation."""
    return specdec.generate_autoregressive(
        TARGET, prompts, max_new_tokens=4, generator=generator, options=OPTIONS
    ).tokens


def test_two_sample_control_is_lossless() -> None:
    """The speculative loop against target-only decoding, 512 pairs per prompt: LOSSLESS
    (false-fail 1e-3) at the stated detectable shift."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4)
    report = audit(sample, mode="two-sample", reference=_reference, samples=512)
    assert report.stream_mode == "two-sample" and report.verdict == "lossless", report.format()


def test_two_sample_finds_a_planted_bug() -> None:
    """The bonus drawn from the unwarped row against target-only decoding: LOSSY (false-fail
    1e-3), stopped by an e-process."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4, bug="bonus_unwarped")
    report = audit(sample, mode="two-sample", reference=_reference, samples=1024)
    assert report.verdict == "lossy", report.format()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "two-sample"}, "needs reference"),
        ({"reference": _reference}, "needs reference"),
        ({"mode": "exact"}, "exact-law mode does not apply"),
        ({"mode": "big"}, "mode must be one of"),
    ],
)
def test_modes_that_do_not_apply_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit(speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4), samples=8, **options)


def test_json_report() -> None:
    import json

    report = audit(speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4), samples=16)
    document = json.loads(report.to_json())
    assert (document["mode"], document["stream_mode"]) == ("statistical", "large")
    assert document["scenarios"][0]["e_processes"]
    assert document["detectable_tv"] is None  # no TV is claimed in large mode


ENGINE = """
import torch
import specdec
from specdec.models import ToyLM
from tests._stream_loops import speculative_loop
from tests.test_audit_stream_large import PAIR, _reference

OPTIONS = specdec.SamplingOptions(temperature=0.7)


def target():
    return ToyLM(PAIR.target)


sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4)
q_unwarped = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4, bug="q_unwarped")
reference = _reference
"""


@pytest.mark.parametrize(
    ("function", "extra", "code"),
    [
        ("sample", [], ExitCode.LOSSLESS),
        ("q_unwarped", [], ExitCode.LOSSY),
        ("sample", ["--stream-mode", "exact"], ExitCode.USAGE_ERROR),
        ("sample", ["--samples", "16"], ExitCode.INCONCLUSIVE),
        (
            "q_unwarped",
            ["--stream-mode", "two-sample", "--reference", "REF", "--samples", "1024"],
            ExitCode.LOSSY,
        ),
        ("sample", ["--reference", "REF", "--samples", "8"], ExitCode.USAGE_ERROR),
    ],
)
def test_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], function: str, extra: list[str],
    code: int,
) -> None:  # fmt: skip
    """``specdec audit --stream ... --stream-mode``: exit 0 lossless, 1 lossy, 2 usage, 3 cannot
    decide (false-fail 1e-3, binned TV 0.2)."""
    (tmp_path / "engine.py").write_text(ENGINE)
    engine = str(tmp_path / "engine.py")
    extra = [f"{engine}:reference" if e == "REF" else e for e in extra]
    arguments = ["audit", "--stream", f"{engine}:{function}", "--target", f"{engine}:target"]
    arguments += ["--prompts", "1;2,3", "--new-tokens", "4", "--temperature", "0.7", "--quiet"]
    arguments += ["--false-fail-rate", "1e-3"]
    if "--samples" not in extra:
        arguments += ["--detect-tv", "0.2"]
    status = main([*arguments, *extra])
    assert status == code, capsys.readouterr()


def test_invalid_outputs_are_reported() -> None:
    """A short generation, or position kinds outside {0, 1, 2}: the engine's invalid output."""
    from specdec.testing.audit import InvalidOutputError

    @batched
    def short(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return torch.zeros(prompts.shape[0], 1, dtype=torch.int64)

    with pytest.raises(InvalidOutputError, match="at least 4 new tokens"):
        audit(short, samples=8)

    def wrong_kinds(prompts: Tensor, tokens: Tensor) -> Tensor:
        return torch.full_like(tokens, 7)

    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=4)
    with pytest.raises(InvalidOutputError, match="position_kinds must label"):
        audit(sample, samples=8, position_kinds=wrong_kinds)
