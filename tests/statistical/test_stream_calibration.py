"""Calibration of the stream audit's large-vocabulary mode: a lossless stream is called lossy
no more often than the nominal rate, and a wrong one is.

``REPEATS`` audits of target-only sampling on a float toy model (``V = 256``, 6 new tokens,
``V^6`` far above the exact limit: large mode), each with its own seed, at the nominal
family-wise false-fail rate ``ALPHA = 0.2`` (large enough to observe); ``X`` false alarms fail
the check only if ``P(Binomial(R, 0.2) >= X) < 1e-3`` (so the check's own false-fail rate is
below 1e-3; it detects a true false-alarm rate of about 0.36 or more with probability about one
half at R = 60). The e-processes are conservative (Ville), so ``X`` is usually far below
``0.2 R``. Paired negative control: an engine sampling at temperature 1 while claiming 0.7
(its warping ignored) must be called lossy in at least half of ``CONTROL_REPEATS`` audits
(measured: every one, each stopped within the first chunk).

The same check covers the e-processes on the bonus positions (``position_kinds`` given: eight
e-processes, each at ``ln(8 / ALPHA)``): ``REPEATS`` audits of a whole speculative loop
(``tests/_stream_lm_loops.py``, ``k = 2``, draft ``0.7 target + 0.3 other``, about 80 bonus
tokens of 384) with its hook, false alarms counted over all eight as above. Paired negative
control: the loop drawing the bonus from the unwarped row, 256 continuations (about 300 bonus
tokens), must have its bonus e-processes cross
in at least half of ``CONTROL_REPEATS`` audits (measured: 10 of 10; the all-token mean
crosses too in 9 of them at this size). Measured on the lossless loop: no false alarm in 60,
largest peak ``ln E`` 0.52 of ``ln 40 = 3.69``, about 76 bonus tokens per audit.
"""

from typing import Any

import torch
from scipy.stats import binom
from torch import Tensor

import specdec
from specdec.models import ToyLM, ToyModel
from specdec.testing.audit import AuditReport, audit_stream
from specdec.testing.audit.reporting.stream_results import KindDecision, StreamStatisticsResult
from specdec.testing.signatures import batched
from tests._stream_lm_loops import lm_loop

ALPHA = 0.2
REPEATS = 60
CONTROL_REPEATS = 10
VOCAB = 256
CLAIMED = specdec.SamplingOptions(temperature=0.7)
_TABLE = torch.softmax(
    3.0 * torch.randn(VOCAB + 1, VOCAB, generator=torch.Generator().manual_seed(5),
                      dtype=torch.float64), -1,
)  # fmt: skip
TARGET = ToyLM(ToyModel.from_table(1, _TABLE))
_OTHER = torch.softmax(
    3.0 * torch.randn(VOCAB + 1, VOCAB, generator=torch.Generator().manual_seed(6),
                      dtype=torch.float64), -1,
)  # fmt: skip
DRAFT = ToyLM(ToyModel.from_table(1, 0.7 * _TABLE + 0.3 * _OTHER))


def _engine(options: specdec.SamplingOptions) -> Any:
    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return specdec.generate_autoregressive(
            TARGET, prompts, max_new_tokens=6, generator=generator, options=options
        ).tokens

    return sample


def _verdicts(engine: Any, repeats: int) -> list[str]:
    return [
        audit_stream(
            engine, TARGET, prompts=[[1]], new_tokens=6, law=CLAIMED, samples=64,
            false_fail_rate=ALPHA, min_power_tv=1.0, seed=seed,
        ).verdict
        for seed in range(repeats)
    ]  # fmt: skip


def test_lossless_stream_false_alarms_are_within_the_nominal_rate() -> None:
    verdicts = _verdicts(_engine(CLAIMED), REPEATS)
    false_alarms = sum(v == "lossy" for v in verdicts)
    assert set(verdicts) <= {"lossless", "lossy"}
    assert float(binom.sf(false_alarms - 1, REPEATS, ALPHA)) >= 1e-3, false_alarms


def test_a_wrong_temperature_is_called_lossy() -> None:
    verdicts = _verdicts(_engine(specdec.SamplingOptions(temperature=1.0)), CONTROL_REPEATS)
    assert sum(v == "lossy" for v in verdicts) >= CONTROL_REPEATS // 2, verdicts


def _loop_reports(bug: str | None, repeats: int, samples: int) -> list[AuditReport]:
    reports = []
    for seed in range(repeats):
        sample, kinds = lm_loop(TARGET, DRAFT, CLAIMED, k=2, new_tokens=6, bug=bug)
        reports.append(audit_stream(
            sample, TARGET, prompts=[[1]], new_tokens=6, law=CLAIMED, samples=samples,
            false_fail_rate=ALPHA, min_power_tv=1.0, seed=seed, position_kinds=kinds,
        ))  # fmt: skip
    return reports


def _bonus(report: AuditReport) -> KindDecision:
    [result] = report.scenarios
    assert isinstance(result, StreamStatisticsResult)
    [bonus] = result.kinds
    return bonus


def test_bonus_e_processes_false_alarms_are_within_the_nominal_rate() -> None:
    reports = _loop_reports(None, REPEATS, 64)
    assert all(_bonus(r).name == "bonus" for r in reports)
    false_alarms = sum(r.verdict == "lossy" for r in reports)
    assert {r.verdict for r in reports} <= {"lossless", "lossy"}
    assert float(binom.sf(false_alarms - 1, REPEATS, ALPHA)) >= 1e-3, false_alarms


def test_a_bonus_drawn_unwarped_crosses_on_the_bonus_positions() -> None:
    reports = _loop_reports("bonus_unwarped", CONTROL_REPEATS, 256)
    crossed = [_bonus(r).lossy for r in reports]
    assert sum(crossed) >= CONTROL_REPEATS // 2, [r.headline() for r in reports]
