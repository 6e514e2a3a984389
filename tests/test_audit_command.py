"""``specdec audit``: the options a level does not take are refused from the subject's table.

Every refusal is a usage error (exit 2) before the audited module is imported; the messages
name the flags. The control: the same flags where they apply run the audit.
"""

import textwrap
from pathlib import Path

import pytest
import torch

from specdec.cli import main
from specdec.testing.audit.command import FLAGS
from specdec.testing.audit.contract.options import AuditOptions


@pytest.fixture
def marker_module(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "imported.txt"
    path = tmp_path / "engine.py"
    path.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\n"
        "from specdec.verify import verify_tokens as rule\n"
    )
    return path, marker


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--target-warp", "m:f"], "--target-warp applies to --step audits only."),
        (["--step", "--ragged"], "--ragged applies to batched verifiers, not to --step audits."),
        (["--step", "--search", "2"], "--step takes none of --search."),
        (["--exact", "--device", "cpu"], "--exact takes --scenarios and --dtype only of the"),
        (["--exact", "--step"], "--exact audits verification rules, not steps."),
        (["--tree", "iid", "--reserved-ids", "0"], "--tree takes none of --reserved-ids."),
        (["--multi-draft", "iid", "--batched"], "--multi-draft takes none of --batched."),
        (["--exact", "--samples", "9"], "exact=True takes none of samples"),
    ],
)
def test_an_option_the_level_does_not_take_is_a_usage_error_before_the_import(
    marker_module: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    path, marker = marker_module
    assert main(["audit", f"{path}:rule", *flags, "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not marker.exists()


def test_the_control_runs_where_the_flags_apply(
    marker_module: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, marker = marker_module
    argv = ["audit", f"{path}:rule", "--exact", "--search", "1", "--scenarios", "equal-v4-k3"]
    assert main([*argv, "--quiet"]) == 0
    assert marker.exists() and "LOSSLESS (exact" in capsys.readouterr().out


def test_every_flag_names_an_option() -> None:
    fields = set(AuditOptions.__dataclass_fields__)
    assert set(FLAGS) <= fields


# -- the command's engine options -----------------------------------------------------------------


def test_cli_engine_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "engine.py"
    path.write_text(
        textwrap.dedent(
            """
            import math
            import torch
            from specdec.testing import zoo
            from specdec.testing.signatures import batched
            from specdec.warp import warp_probs

            @batched
            def no_top_p(target_logits, draft_logits, prefix, k, generator, **options):
                if options["top_p"] is not None:
                    raise ValueError("top_p is not supported")
                return zoo.reference_step(target_logits, draft_logits, prefix, k, generator,
                                          **options)

            def exactly_k(logits, *, temperature, top_k, top_p):
                if top_k is None or temperature == 0:
                    return warp_probs(logits, temperature=temperature, top_p=top_p)
                kept = torch.topk(logits, top_k, dim=-1).indices
                masked = torch.full_like(logits, -math.inf).scatter(
                    -1, kept, logits.gather(-1, kept))
                return warp_probs(masked, temperature=temperature, top_p=top_p)

            def sampler(logits, generator, **options):
                probs = exactly_k(logits.double(), **options)
                return torch.multinomial(probs, 1, generator=generator)[:, 0]

            @batched
            def engine(target_logits, draft_logits, prefix, k, generator, **options):
                def law(logits):
                    return exactly_k(logits, **options)

                def warped(logits_fn):
                    return lambda ids: torch.log(law(logits_fn(ids)))

                # the reference step at temperature 1 on logits the engine has warped already
                return zoo.reference_step(warped(target_logits), warped(draft_logits), prefix, k,
                                          generator, temperature=1.0, top_k=None, top_p=None)
            """
        )
    )
    # few samples on purpose (the conventions are under test): any power is accepted
    step = ["audit", f"{path}:no_top_p", "--step", "--samples", "3000", "--min-power-tv", "1"]
    step.append("--quiet")
    assert main([*step, "--scenarios", "plain-v4-k2,greedy-v5-k1"]) == 0
    assert "LOSSLESS" in capsys.readouterr().out
    assert main([*step, "--scenarios", "plain-v4-k2,topp-v5-k1", "--reserved-ids", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "NOT AUDITED" in out and "reserved ids 0, 1 kept out" in out
    warp = ["--scenarios", "hot-v5-k3", "--target-warp", f"{path}:exactly_k", "--dtype", "float32"]
    engine = ["audit", f"{path}:engine", "--step", "--samples", "3000", "--min-power-tv", "1"]
    engine.append("--quiet")
    assert main([*engine, *warp]) == 0
    assert "warping DIFFERS" in capsys.readouterr().out
    assert main([*engine, "--scenarios", "hot-v5-k3", "--target-sampler", f"{path}:sampler"]) == 0
    assert "estimated from its sampler" in capsys.readouterr().out
    both = ["--target-sampler", f"{path}:sampler", "--target-warp", f"{path}:exactly_k"]
    assert main([*engine, *both]) == 2
    # against specdec's warping: TV 0.164, above the 0.13 detectable at 20,000 samples
    assert main([*engine, "--scenarios", "hot-v5-k3", "--samples", "20000"]) == 1
    assert main([*step, "--scenarios", "nope"]) == 2
    assert "plain-v4-k2" in capsys.readouterr().err  # the known names are listed
    verifier = ["audit", "specdec.testing.zoo:reference_verifier", "--samples", "500"]
    assert main([*verifier, "--target-warp", f"{path}:exactly_k"]) == 2
    assert main([*verifier, "--reserved-ids", "a,b"]) == 2
    if not torch.cuda.is_available():
        assert main([*verifier, "--device", "cuda"]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    assert main([*verifier, "--exact", "--scenarios", "large-v2048-k1"]) == 2
    assert "float-only" in capsys.readouterr().err
    assert main(["audit", "--list-scenarios"]) == 0
    assert "large-v2048-k1" in capsys.readouterr().out


def test_exact_takes_the_batched_flag_for_an_unmarked_batched_verifier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--batched`` reaches the exact audit too (its draws captured per block); without it the
    unmarked batched function is run as a single-sequence one and crashes (the control)."""
    path = tmp_path / "engine.py"
    path.write_text(
        "import specdec\n\n"
        "def batched_fn(draft_tokens, draft_probs, target_probs, generator):\n"
        "    shape = (draft_tokens.shape[0], draft_tokens.shape[1] + 1)\n"
        "    noise = specdec.uniforms(generator, shape)\n"
        "    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens\n"
    )
    argv = ["audit", f"{path}:batched_fn", "--exact", "--scenarios", "equal-v4-k3", "--search", "0"]
    assert main([*argv, "--batched", "--quiet"]) == 0
    assert "LOSSLESS (exact on 1 verifier scenario(s))" in capsys.readouterr().out
    assert main([*argv, "--quiet"]) == 6  # CRASH: the rows of one block have no batch axis
    assert "hint: if" in capsys.readouterr().err  # with a hint, not a bare traceback
