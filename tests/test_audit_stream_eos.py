"""The stream audit until EOS (``audit_stream(..., eos_token_id=)``): EOS absorbing.

The law judged is that of "the first ``n`` tokens or until EOS": positions after the first
EOS hold a stop symbol (code ``V``). Toy pair V = 4 (seed 0, closeness 3/4), temperature 1,
prompt ``[1]``, EOS = token 2 (first-token mass 0.083, all 3 tokens: 0.21 of the streams
stop early), ``n = 3``: 5^3 = 125 outcome codes. Audits run at the default family-wise
false-fail rate 1e-6 and false-pass rate 1e-3 at ``DETECT_TV``.

The EOS bugs' distances were measured as half the L1 distance between 200,000 draws of each
loop (k = 2) and the exact law (the lossless loop measures 0.002 there: the noise floor):
``past_eos`` 0.065 (all of it outcomes the target forbids: tokens after an EOS),
``eos_redraft`` 0.030.
"""

from fractions import Fraction
from pathlib import Path

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.audit import InvalidOutputError, ScenarioResult, audit_stream
from specdec.testing.audit.judging.stream import stream_law, stream_scenarios
from specdec.testing.signatures import batched
from tests._stream_loops import EOS_BUGS, speculative_loop

PAIR = make_toy_pair(4, seed=0, closeness=Fraction(3, 4))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
OPTIONS = specdec.SamplingOptions()
EOS, STOP = 2, 4
EOS_BUG_TV = {"past_eos": 0.065, "eos_redraft": 0.030}
DETECT_TV = 0.02


def _speculative(eos: int | None = EOS) -> object:
    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return specdec.generate_speculative(
            TARGET, DRAFT, prompts, k=2, max_new_tokens=3, generator=generator,
            target_options=OPTIONS, eos_token_id=eos,
        ).tokens  # fmt: skip

    return sample


def test_law_until_eos_is_the_absorbed_law() -> None:
    """Mass 1; a stream ending in EOS at position i carries its i-token prefix's mass; no mass
    on a token after EOS nor on a stop before it."""
    [plain] = stream_scenarios([[1]], 3, TARGET, OPTIONS)
    [until] = stream_scenarios([[1]], 3, TARGET, OPTIONS, eos_token_id=EOS)
    full, law = stream_law(plain).reshape(4, 4, 4), stream_law(until).reshape(5, 5, 5)
    assert float(law.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(law[EOS, STOP, STOP]) == pytest.approx(float(full[EOS].sum()), abs=1e-15)
    assert float(law[0, EOS, STOP]) == pytest.approx(float(full[0, EOS].sum()), abs=1e-15)
    assert torch.equal(law[0, 1, :4], full[0, 1])  # no EOS: the plain law
    assert float(law[EOS, :STOP].sum()) == 0.0 and float(law[EOS, STOP, :STOP].sum()) == 0.0
    assert float(law[:, :, STOP][:4, :4].sum() - law[:4, EOS, STOP].sum()) == 0.0
    assert float(law[STOP].sum()) == 0.0 and float(law[0, STOP].sum()) == 0.0


def test_generate_speculative_until_eos_is_lossless() -> None:
    """specdec's loop stopping at EOS (``-1`` after it): LOSSLESS at TV 0.02 (false-fail
    1e-6, false-pass 1e-3 at 0.02)."""
    report = audit_stream(
        _speculative(), TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS,
        eos_token_id=EOS, detect_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()


def test_hand_written_loop_until_eos_is_lossless() -> None:
    """The loop the EOS bugs are planted in, without a bug (k = 2): LOSSLESS (false-fail
    1e-6)."""
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=3, eos=EOS)
    report = audit_stream(
        sample, TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS, eos_token_id=EOS,
        detect_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()


@pytest.mark.parametrize("bug", EOS_BUGS)
def test_eos_bug_is_lossy(bug: str) -> None:
    """Tokens kept after an accepted EOS (TV 0.065, outcomes the target forbids: a certain
    rejection) and a rejected drafted EOS redrafted (TV 0.030 > 0.02): LOSSY (false-pass
    <= 1e-3 at 0.02, false-fail 1e-6)."""
    assert EOS_BUG_TV[bug] > DETECT_TV
    sample = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=3, eos=EOS, bug=bug)
    report = audit_stream(
        sample, TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS, eos_token_id=EOS,
        detect_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == "lossy", report.format()
    [scenario] = report.scenarios
    assert isinstance(scenario, ScenarioResult)
    assert (scenario.impossible_outcomes > 0) == (bug == "past_eos")


def test_eos_repeated_after_eos_reads_as_stop() -> None:
    """An engine padding with EOS (``pad_token_id = eos``) is read as stopped: LOSSLESS."""
    inner = _speculative()

    @batched
    def padded_with_eos(prompts: Tensor, generator: torch.Generator) -> Tensor:
        tokens = inner(prompts, generator)  # type: ignore[operator]
        return torch.where(tokens < 0, EOS, tokens)

    report = audit_stream(
        padded_with_eos, TARGET, prompts=[[1]], new_tokens=3, law=OPTIONS,
        eos_token_id=EOS, detect_tv=0.05,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()


def test_an_early_stop_needs_eos_token_id() -> None:
    """Without ``eos_token_id`` a stream that stops is an invalid output (as before)."""
    with pytest.raises(InvalidOutputError, match="no -1 padding"):
        audit_stream(_speculative(), TARGET, prompts=[[1]], new_tokens=3, samples=2000)


def test_a_stop_without_eos_is_invalid_output() -> None:
    @batched
    def stops(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return torch.tensor([[0, -1, -1]]).expand(prompts.shape[0], 3)

    with pytest.raises(InvalidOutputError, match="without an EOS"):
        audit_stream(stops, TARGET, prompts=[[1]], new_tokens=3, eos_token_id=EOS, samples=10)


def test_an_id_outside_the_vocabulary_is_invalid_output() -> None:
    @batched
    def outside(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return torch.tensor([[2, 4, 4]]).expand(prompts.shape[0], 3)  # 4 is not a token

    with pytest.raises(InvalidOutputError, match=r"ids in \[0, 4\)"):
        audit_stream(outside, TARGET, prompts=[[1]], new_tokens=3, eos_token_id=EOS, samples=10)


@pytest.mark.parametrize("eos", [4, -1, True, 1.0])
def test_eos_token_id_is_checked(eos: object) -> None:
    with pytest.raises(ValueError, match="eos_token_id must be an id in"):
        stream_scenarios([[1]], 3, TARGET, OPTIONS, eos_token_id=eos)  # type: ignore[arg-type]


def test_exact_mode_counts_the_stop_symbol() -> None:
    """4^8 = 65,536 fits exact-law mode; (4+1)^8 with EOS does not, and no verdict is given."""
    stream_scenarios([[1]], 8, TARGET, OPTIONS)
    with pytest.raises(ValueError, match="exact-law mode does not apply: 5 \\*\\* new_tokens"):
        stream_scenarios([[1]], 8, TARGET, OPTIONS, eos_token_id=EOS)


ENGINE = """
from fractions import Fraction
import specdec
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.signatures import batched

PAIR = make_toy_pair(4, seed=0, closeness=Fraction(3, 4))


def target():
    return ToyLM(PAIR.target)


@batched
def sample(prompts, generator):
    return specdec.generate_speculative(
        target(), ToyLM(PAIR.draft), prompts, k=2, max_new_tokens=3, generator=generator,
        eos_token_id=2,
    ).tokens
"""


@pytest.mark.parametrize(("extra", "code"), [(["--eos-token-id", "2"], 0), ([], 5)])
def test_command_eos_token_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], code: int
) -> None:
    """``specdec audit --stream ... --eos-token-id 2``: LOSSLESS (exit 0) at TV 0.05; without
    it the engine's early stops are an invalid output (exit 5)."""
    (tmp_path / "engine.py").write_text(ENGINE)
    engine = str(tmp_path / "engine.py")
    arguments = ["audit", "--stream", f"{engine}:sample", "--target", f"{engine}:target"]
    arguments += ["--prompts", "1", "--new-tokens", "3", "--detect-tv", "0.05", "--quiet"]
    assert main([*arguments, *extra]) == code, capsys.readouterr()


def test_command_refuses_eos_token_id_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "specdec:verify_tokens", "--eos-token-id", "1"]) == 2
    assert "applies to --stream audits only" in capsys.readouterr().err
