"""The stream audit's exact-law mode (``specdec.testing.audit.judging.stream``, ``audit_stream``).

Every audit here runs at the default family-wise false-fail rate 1e-6 (so a lossless control
fails with probability <= 1e-6) and false-pass rate 1e-3 per prompt at the distance it was
sized for. The planted bugs' distances were measured on prompt ``[1]`` (toy pair V = 4, seed 0,
closeness 3/4; temperature 0.5; k = 1; the first 3 new tokens: 64 outcomes), as half the L1
distance between 4,000,000 draws of each loop and the target's exact law (the lossless loop
measures 0.0002 there: the noise floor): ``BUG_TV``.
"""

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, ToyModel, make_toy_pair
from specdec.testing.audit import ExitCode, InvalidOutputError, ScenarioResult, audit_stream
from specdec.testing.audit.judging.stream import stream_law, stream_scenarios
from specdec.testing.signatures import batched
from tests._stream_loops import BUGS, speculative_loop

PAIR = make_toy_pair(4, seed=0, closeness=Fraction(3, 4))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
OPTIONS = specdec.SamplingOptions(temperature=0.5)
FILTERED = specdec.SamplingOptions(temperature=0.7, top_k=2)
BUG_TV = {"bonus_unwarped": 0.0803, "q_unwarped": 0.0766, "reused_uniform": 0.0348}
DETECT_TV = 0.02


def speculative(options: specdec.SamplingOptions, k: int = 2) -> Any:
    """specdec's own ``generate_speculative`` as a batched stream sampler."""

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        generation = specdec.generate_speculative(
            TARGET, DRAFT, prompts, k=k, max_new_tokens=3, generator=generator,
            target_options=options,
        )  # fmt: skip
        return generation.tokens

    return sample


def test_stream_law_is_the_product_of_warped_rows() -> None:
    """The enumerated law sums to 1 and its first-token marginal is the warped row."""
    [scenario] = stream_scenarios([[1, 2]], 2, TARGET, FILTERED)
    law = stream_law(scenario).reshape(4, 4)
    row = FILTERED.probs(torch.log(PAIR.target.float_probs(torch.tensor([[1, 2]]))))[0]
    assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)
    assert torch.allclose(law.sum(1), row, atol=1e-12)


@pytest.mark.parametrize("options", [OPTIONS, FILTERED], ids=["T0.5", "T0.7-top2"])
def test_generate_speculative_is_lossless(options: specdec.SamplingOptions) -> None:
    """specdec's own loop (k = 2), two prompts: LOSSLESS at TV 0.02 (false-fail 1e-6; a
    deviation of TV >= 0.02 over pooled cells is missed with rate <= 1e-3)."""
    report = audit_stream(
        speculative(options), TARGET, prompts=[[1], [2, 3]], new_tokens=3, law=options,
        detect_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()
    assert [s.name for s in report.scenarios] == ["prompt-0", "prompt-1"]
    assert report.level == "stream" and report.detectable_tv <= DETECT_TV


def test_generate_autoregressive_is_lossless() -> None:
    """Target-only decoding, one prompt: LOSSLESS at TV 0.02 (false-fail 1e-6, false-pass
    1e-3 at 0.02)."""

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return specdec.generate_autoregressive(
            TARGET, prompts, max_new_tokens=3, generator=generator, options=FILTERED
        ).tokens

    report = audit_stream(
        sample, TARGET, prompts=[[3]], new_tokens=3, law=FILTERED, detect_tv=DETECT_TV
    )
    assert report.verdict == "lossless", report.format()


def test_hand_written_loop_control_is_lossless() -> None:
    """The loop the bugs are planted in, without a bug: LOSSLESS (false-fail 1e-6)."""
    sample = speculative_loop(PAIR, OPTIONS, k=1, new_tokens=3)
    report = audit_stream(
        sample, TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS, detect_tv=DETECT_TV
    )
    assert report.verdict == "lossless", report.format()


@pytest.mark.parametrize("bug", BUGS)
def test_planted_bug_is_lossy(bug: str) -> None:
    """Each planted bug (TV 0.080, 0.077, 0.035 on this prompt, ``BUG_TV``) above the 0.02
    the audit is sized for: LOSSY with false-pass rate <= 1e-3 (false-fail 1e-6). Measured:
    the e-process stops each at the end of its first chunk, 2,000 draws (p <= 1e-20)."""
    assert BUG_TV[bug] > DETECT_TV  # the planned sample detects this distance
    sample = speculative_loop(PAIR, OPTIONS, k=1, new_tokens=3, bug=bug)
    report = audit_stream(
        sample, TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS, detect_tv=DETECT_TV
    )
    assert report.verdict == "lossy", report.format()
    assert report.exit_code == ExitCode.LOSSY


def test_filtered_token_is_a_certain_rejection() -> None:
    """An engine that ignores top-k = 2 emits tokens the target forbids: LOSSY by forbidden
    outcome (rate 0 for a lossless engine)."""
    report = audit_stream(
        speculative(specdec.SamplingOptions(temperature=0.7)), TARGET, prompts=[[1]],
        new_tokens=3, law=FILTERED, detect_tv=DETECT_TV,
    )  # fmt: skip
    [scenario] = report.scenarios
    assert isinstance(scenario, ScenarioResult) and scenario.impossible_outcomes > 0
    assert report.verdict == "lossy" and scenario.deciding_test == "forbidden outcome"


def test_single_sequence_sampler() -> None:
    """The unbatched form (one call per draw), V = 4, 2 new tokens, TV 0.1: LOSSLESS
    (false-fail 1e-6, false-pass 1e-3 at 0.1); min_power_tv 0.1 so it is not INCONCLUSIVE."""

    def sample(prompt: Tensor, generator: torch.Generator) -> Tensor:
        generation = specdec.generate_speculative(
            TARGET, DRAFT, prompt[None], k=2, max_new_tokens=2, generator=generator,
            target_options=OPTIONS,
        )  # fmt: skip
        return generation.tokens[0]

    report = audit_stream(
        sample, TARGET, prompts=[[2]], new_tokens=2, law=OPTIONS, detect_tv=0.1,
        min_power_tv=0.1,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()
    assert report.signature.startswith("stream sampler")


def test_few_samples_are_inconclusive() -> None:
    """300 draws detect only a large TV: INCONCLUSIVE (exit 3) with the size that decides."""
    report = audit_stream(
        speculative(OPTIONS), TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS, samples=300
    )
    assert report.verdict == "inconclusive" and report.exit_code == ExitCode.INCONCLUSIVE
    [scenario] = report.scenarios
    assert isinstance(scenario, ScenarioResult) and scenario.samples_to_decide > 300


def test_large_vocabulary_is_refused() -> None:
    """V ** new_tokens = 257^2 > 65536: exact-law mode, asked for, does not apply, and no
    verdict (``mode="auto"`` judges it in large-vocabulary mode: test_audit_stream_large)."""
    table = torch.full((258, 257), 1 / 257, dtype=torch.float64)
    model = ToyLM(ToyModel.from_table(1, table))
    with pytest.raises(ValueError, match="exact-law mode does not apply"):
        audit_stream(speculative(OPTIONS), model, prompts=[[1]], new_tokens=2, mode="exact")


@pytest.mark.parametrize(
    ("options", "match"),
    [({"exact": True}, "leave exact out"), ({"search": 3}, "takes none of search")],
)
def test_options_that_do_not_apply_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_stream(speculative(OPTIONS), TARGET, prompts=[[1]], new_tokens=2, **options)


def test_short_generation_is_invalid_output() -> None:
    @batched
    def short(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return torch.zeros(prompts.shape[0], 1, dtype=torch.int64)

    with pytest.raises(InvalidOutputError, match="at least 3 new tokens"):
        audit_stream(short, TARGET, prompts=[[1]], new_tokens=3, samples=10)


def test_exported_from_specdec_testing() -> None:
    import specdec.testing

    assert specdec.testing.audit_stream is audit_stream


ENGINE = """
from fractions import Fraction
import specdec
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.signatures import batched
from tests._stream_loops import speculative_loop

PAIR = make_toy_pair(4, seed=0, closeness=Fraction(3, 4))
OPTIONS = specdec.SamplingOptions(temperature=0.5)


def target():
    return ToyLM(PAIR.target)


@batched
def sample(prompts, generator):
    return specdec.generate_speculative(
        target(), ToyLM(PAIR.draft), prompts, k=2, max_new_tokens=3, generator=generator,
        target_options=OPTIONS,
    ).tokens


bonus_unwarped = speculative_loop(PAIR, OPTIONS, k=1, new_tokens=3, bug="bonus_unwarped")


@batched
def crashes(prompts, generator):
    raise RuntimeError("the engine's own bug")


class BrokenModel:
    vocab_size = 4

    def forward(self, ids, context):
        raise KeyError("the target's own bug")


def broken_target():
    return BrokenModel()
"""


@pytest.mark.parametrize(
    ("function", "extra", "code"),
    [
        ("sample", [], ExitCode.LOSSLESS),
        ("bonus_unwarped", [], ExitCode.LOSSY),
        ("sample", ["--exact"], ExitCode.USAGE_ERROR),
        ("sample", ["--new-tokens", "9", "--stream-mode", "exact"], ExitCode.USAGE_ERROR),
        ("crashes", [], ExitCode.CRASH),  # the engine's crash, never specdec's internal error
    ],
)
def test_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], function: str, extra: list[str],
    code: int,
) -> None:  # fmt: skip
    """``specdec audit --stream``: exit 0 lossless, 1 lossy (TV 0.080 > 0.02), 2 usage."""
    (tmp_path / "engine.py").write_text(ENGINE)
    engine = str(tmp_path / "engine.py")
    arguments = ["audit", "--stream", f"{engine}:{function}", "--target", f"{engine}:target"]
    arguments += ["--prompts", "1", "--new-tokens", "3", "--temperature", "0.5", "--quiet"]
    status = main([*arguments, "--detect-tv", "0.02", *extra])
    assert status == code, capsys.readouterr()


def test_a_crash_of_the_target_model_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target model is the user's too: its error is reported as its crash (exit 6, named),
    never as the sampler's nor as specdec's internal error."""
    (tmp_path / "engine.py").write_text(ENGINE)
    engine = str(tmp_path / "engine.py")
    arguments = ["audit", "--stream", f"{engine}:sample", "--target", f"{engine}:broken_target"]
    arguments += ["--prompts", "1", "--new-tokens", "3", "--quiet", "--detect-tv", "0.05"]
    assert main(arguments) == ExitCode.CRASH
    err = capsys.readouterr().err
    assert "the target model (--target)" in err and "sample crashed" not in err


def test_command_refuses_stream_options_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "specdec:verify_tokens", "--prompts", "1"]) == ExitCode.USAGE_ERROR
    assert "applies to --stream audits only" in capsys.readouterr().err


def test_transformers_target_is_wrapped() -> None:
    """A transformers causal LM as the target (a tiny Llama, V = 8, built with a seed; wrapped
    in ``HFModel`` by the audit) and specdec's loop with a noisy copy as the draft, T 0.8,
    top-p 0.9, 2 new tokens: LOSSLESS at TV 0.05 (false-fail 1e-6, false-pass 1e-3; 12,506
    draws, 0.6 s here)."""
    from specdec.models import HFModel
    from tests._tiny_models import noisy_copy, tiny_model

    model = tiny_model("llama", vocab=8, seed=0)
    target, draft = HFModel(model), HFModel(noisy_copy(model, scale=0.3, seed=1))
    options = specdec.SamplingOptions(temperature=0.8, top_p=0.9)

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return specdec.generate_speculative(
            target, draft, prompts, k=2, max_new_tokens=2, generator=generator,
            target_options=options,
        ).tokens  # fmt: skip

    report = audit_stream(
        sample, model, prompts=[[1, 2]], new_tokens=2, law=options, detect_tv=0.05
    )
    assert report.verdict == "lossless", report.format()


def test_global_rng_sampler_is_nondeterministic_unless_allowed() -> None:
    """An engine seeding itself from torch's global RNG gives other tokens under one seed:
    NONDETERMINISTIC (exit 4); with ``allow_nondeterministic`` its law alone is judged:
    LOSSLESS at TV 0.05 (false-fail 1e-6, false-pass 1e-3)."""

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        own = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
        return specdec.generate_speculative(
            TARGET, DRAFT, prompts, k=2, max_new_tokens=2, generator=own, target_options=OPTIONS
        ).tokens

    common: dict[str, Any] = {"prompts": [[1]], "new_tokens": 2, "law": OPTIONS}
    report = audit_stream(sample, TARGET, detect_tv=0.05, **common)
    assert report.verdict == "nondeterministic" and report.exit_code == 4
    allowed = audit_stream(sample, TARGET, detect_tv=0.05, allow_nondeterministic=True, **common)
    assert allowed.verdict == "lossless", allowed.format()
