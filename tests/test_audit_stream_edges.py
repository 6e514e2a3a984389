"""A stream audit's sharp edges: each misuse named, EOS refused where it is not judged, the
mode resolved once in the plan, and every stream's plan, sizes and estimate before it starts
(``stream_outputs``, ``stream_modes``, ``stream_pilot``, ``transformers_stream``).

The engine is specdec's own loop on a toy pair (``V = 4``, 2 new tokens: exact-law mode by
default); every misuse is refused before or at the first chunk, so no test decides a verdict
(no error rate is involved) except where a report's sizes are compared with its plan's.
"""

from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.audit import (
    AuditOptions,
    InvalidOutputError,
    StreamOptions,
    as_subject,
    audit,
    audit_stream,
    plan_audit,
)
from specdec.testing.audit.contract.stream_options import StreamModeError, StreamSignatureError
from specdec.testing.audit.judging.stream import stream_scenarios
from specdec.testing.audit.judging.stream_large import LARGE_DETECT_TV, judge_stream, large_sizes
from specdec.testing.audit.stream_pilot import stream_announcement, stream_sizes
from specdec.testing.signatures import batched
from specdec.testing.transformers_stream import transformers_stream_sampler

PAIR = make_toy_pair(4, seed=0)
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
HERE = "tests.test_audit_stream_edges"
STREAM = ["audit", "--stream", "--target", f"{HERE}:TARGET", "--prompts", "1", "--new-tokens", "2"]


@batched
def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The speculative loop (lossless)."""
    return specdec.generate_speculative(
        TARGET, DRAFT, prompts, k=2, max_new_tokens=2, generator=generator
    ).tokens


def one(prompt: Tensor, generator: torch.Generator) -> Tensor:
    """The loop on one prompt ``[L] -> [2]``."""
    return sample(prompt[None], generator)[0]


CALLS: list[int] = []


def counted(prompt: Tensor, generator: torch.Generator) -> Tensor:
    """``one``, counting its calls."""
    CALLS.append(1)
    return one(prompt, generator)


def one_parameter(prompt: Tensor) -> Tensor:
    """A sampler without its generator."""
    return prompt


def kinds(prompts: Tensor, tokens: Tensor) -> Tensor:
    return torch.zeros_like(tokens)


def _refused(fn: Any, **keywords: Any) -> str:
    with pytest.raises(InvalidOutputError) as raised:
        audit_stream(fn, TARGET, prompts=[[1]], new_tokens=2, samples=16, **keywords)
    return str(raised.value)


# -- misuse: what a sampler returned, and its signature -----------------------------------------


def test_a_python_list_is_named_single_and_batched() -> None:
    """Was ``TypeError: list indices must be integers or slices, not NoneType`` (single)."""
    for fn in (lambda p, g: one(p, g).tolist(), batched(lambda p, g: sample(p, g).tolist())):
        message = _refused(fn)
        assert "returned a Python list" in message and "torch.tensor(...)" in message


def test_a_single_sampler_keeping_the_batch_axis_is_named() -> None:
    """Was "an engine that stopped early", though nothing stopped."""
    message = _refused(lambda p, g: sample(p[None], g))
    assert "got shape (1, 2) (it kept the batch axis: return out[0]" in message
    assert "stopped" not in message
    assert "dropped the batch axis" in _refused(batched(lambda p, g: one(p[0], g)))


def test_the_prompt_returned_with_the_new_tokens_is_named() -> None:
    """Was LOSSY with no word about the prompt; single and batched."""
    with_prompt = [
        lambda p, g: torch.cat([p, one(p, g)]),
        batched(lambda p, g: torch.cat([p, sample(p, g)], dim=1)),
    ]
    for fn in with_prompt:
        message = _refused(fn)
        assert "returned the prompt with the new tokens" in message and "out[..., 1:]" in message


def test_a_one_parameter_sampler_is_a_usage_error_naming_the_forms() -> None:
    """Was a raw ``TypeError: <lambda>() takes 1 positional argument but 2 were given``;
    refused when planned (nothing called), and by the command with exit 2."""
    for bad in (lambda prompt: prompt, batched(lambda prompts: prompts)):
        with pytest.raises(StreamSignatureError, match=r"sample must take \(prompt, generator\)"):
            audit_stream(bad, TARGET, prompts=[[1]], new_tokens=2, samples=16)
    with pytest.raises(TypeError, match=r"@batched sample\(prompts \[N, L\], generator\)"):
        subject = as_subject(one_parameter, level="stream")
        plan_audit(subject, None, stream_scenarios([[1]], 2, TARGET))
    assert main([*STREAM, f"{HERE}:one_parameter", "--dry-run"]) == 2


def test_the_users_own_errors_stay_theirs() -> None:
    """A sampler's own TypeError is raised as it was (not renamed by specdec)."""

    def broken(prompt: Tensor, generator: torch.Generator) -> Tensor:
        raise TypeError("my own bug")

    with pytest.raises(TypeError, match=r"^my own bug$"):
        audit_stream(broken, TARGET, prompts=[[1]], new_tokens=2, samples=16)


def test_a_batched_sampler_audited_as_single_is_named() -> None:
    """``transformers_stream_sampler(..., batched=False)``: was ``IndexError: tuple index out
    of range`` (audited with ``batched=False``) or transformers' unused ``model_kwargs``."""
    with pytest.raises(StreamSignatureError, match=r"marked @batched .* batched=False"):
        audit_stream(sample, TARGET, prompts=[[1]], new_tokens=2, samples=16, batched=False)
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=8, n_embd=8, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config).eval()
    with pytest.raises(TypeError, match="takes no batched=: its sampler is always batched"):
        transformers_stream_sampler(model, max_new_tokens=2, batched=False)
    with pytest.raises(TypeError, match="stop_at_eos="):
        transformers_stream_sampler(model, max_new_tokens=2, eos_token_id=None)
    sampler = transformers_stream_sampler(model, max_new_tokens=2)
    with pytest.raises(ValueError, match=r"takes prompts \[N, L\], got \(2,\)"):
        sampler(torch.tensor([1, 2]), torch.Generator())


def test_the_early_stop_errors_name_eos_token_id() -> None:
    padded = batched(lambda p, g: torch.cat([sample(p, g)[:, :1], -torch.ones_like(p)], 1))
    assert "eos_token_id=ID" in _refused(padded) and "stop_at_eos=False" in _refused(padded)
    short = batched(lambda p, g: sample(p, g)[:, :1])
    assert "stopped early" in _refused(short) and "eos_token_id=ID" in _refused(short)
    assert "(eos_token_id=2 judges stops at that EOS only)" in _refused(padded, eos_token_id=2)


# -- EOS: refused where it is not judged, before any generation -----------------------------


def test_prompts_until_eos_in_large_mode_are_refused_before_any_generation() -> None:
    """Was ignored, then InvalidOutputError after the generations."""
    CALLS.clear()
    prompts = stream_scenarios([[1]], 2, TARGET, eos_token_id=2)
    for mode in ("large", "two-sample"):
        reference = counted if mode == "two-sample" else None
        options = AuditOptions(samples=16, stream=StreamOptions(mode=mode, reference=reference))
        with pytest.raises(StreamModeError, match="eos_token_id applies to exact-law mode only"):
            audit(as_subject(counted, level="stream"), options, scenarios=prompts)
    assert CALLS == []


def test_transformers_sampler_without_stopping_treats_eos_as_a_token() -> None:
    """``stop_at_eos=False``: every row ``max_new_tokens`` long, EOS among them; the model's
    own config untouched (12 rows of 4 tokens; EOS id 1 has real mass)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)  # the model's weights (transformers initialises from the global RNG)
    config = transformers.GPT2Config(
        vocab_size=4, n_embd=8, n_layer=1, n_head=2, eos_token_id=1, initializer_range=0.02
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    prompts = torch.tensor([[2, 3]]).expand(12, 2)
    kept = transformers_stream_sampler(model, max_new_tokens=4, pad_token_id=0, stop_at_eos=False)
    out = kept(prompts, torch.Generator().manual_seed(0))
    assert bool((out >= 0).all()) and bool((out == 1).any())
    assert model.generation_config.eos_token_id == 1
    stopped = transformers_stream_sampler(model, max_new_tokens=4, pad_token_id=0)
    assert bool((stopped(prompts, torch.Generator().manual_seed(0)) == -1).any())


# -- the mode resolved once, in the plan -------------------------------------------------------


def test_the_plan_resolves_the_mode_and_dry_run_reports_its_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``position_kinds`` on a small ``V ** n`` (auto: exact-law): a StreamModeError when
    planned, so ``--dry-run`` exits 2 naming it (it used to print the plan and exit 0)."""
    prompts = stream_scenarios([[1]], 2, TARGET)
    options = AuditOptions(samples=16, stream=StreamOptions(position_kinds=kinds))
    with pytest.raises(StreamModeError, match="position_kinds applies"):
        plan_audit(as_subject(counted, level="stream"), options, prompts)
    argv = [*STREAM, f"{HERE}:counted", "--position-kinds", f"{HERE}:kinds", "--dry-run"]
    CALLS.clear()
    assert main(argv) == 2 and CALLS == []
    assert "position_kinds applies" in capsys.readouterr().err
    with pytest.raises(ValueError, match="runs a planned mode"):
        judge_stream(as_subject(counted, level="stream"), AuditOptions(), prompts, None, "auto")


# -- plans before long runs ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["exact", "large", "two-sample"])
def test_every_mode_reports_its_plan_sizes_and_estimate_first(mode: str) -> None:
    """In the API's progress, before the first chunk; the sizes are the ones drawn."""
    reference = {"reference": sample} if mode == "two-sample" else {}
    lines: list[str] = []
    report = audit_stream(
        sample, TARGET, prompts=[[1], [2]], new_tokens=2, samples=16, mode=mode,
        progress=lines.append, **reference,
    )  # fmt: skip
    first = next(i for i, line in enumerate(lines) if line.startswith("["))
    told = "\n".join(lines[:first])
    assert told.startswith("plan: statistical stream audit") and f"stream mode {mode}" in told
    assert "generations: at most" in told and "pilot: 8 generation(s) per engine timed" in told
    plan = plan_audit(
        as_subject(sample, level="stream"),
        AuditOptions(samples=16, stream=StreamOptions(mode=mode, **reference)),
        stream_scenarios([[1], [2]], 2, TARGET),
    )
    sizes = stream_sizes(plan)
    assert sizes.per_prompt == 16 and sizes.tokens == 2 * sizes.generations
    if mode != "exact":
        assert report.scenarios[0].continuations == sizes.per_prompt * 2  # type: ignore[union-attr]


def test_the_large_sizes_follow_the_modes_formula() -> None:
    """Large mode at its default power: the binned-PIT test's token count over ``n`` and the
    prompts, plus the 16-generation probe; nothing called."""
    plan = plan_audit(
        as_subject(counted, level="stream"),
        AuditOptions(stream=StreamOptions(mode="large")),
        stream_scenarios([[1], [2]], 4, TARGET, exact_law=False),
    )
    CALLS.clear()
    sizes = stream_sizes(plan)
    _, per_prompt, target = large_sizes(plan.options, 4, 2, False)
    assert target == LARGE_DETECT_TV and sizes.per_prompt == per_prompt
    assert sizes.generations == 2 * per_prompt + 16 and sizes.scored_tokens == 2 * per_prompt * 4
    assert CALLS == [] and "binned-PIT TV 0.05" in sizes.line()
    assert len(stream_announcement(plan, timed=False)) == len(plan.lines()) + 1


def test_the_command_prints_a_streams_sizes_dry_and_its_estimate_before_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    CALLS.clear()
    assert main([*STREAM, f"{HERE}:counted", "--stream-mode", "large", "--dry-run"]) == 0
    assert CALLS == [] and "generations: at most" in capsys.readouterr().err
    argv = [*STREAM, f"{HERE}:counted", "--stream-mode", "large", "--samples", "8"]
    assert main(argv) != 2
    err = capsys.readouterr().err
    assert err.index("generations: at most") < err.index("pilot: 8") < err.index("[large]")
