"""transformers' assisted generation recorded step by step (``testing.transformers_record``).

Tiny config-built Llama pairs (``tests._tiny_models``: 2 layers, V = 8, token 1 the EOS),
the draft a noisy copy of the target. The record is checked against rows recomputed by
teacher forcing (the target's and the draft's forward on each step's context, warped by
specdec's ``warp_probs``); its positions and emitted tokens against what ``generate``
returned.

Finding about transformers (5.24) pinned here: the assistant samples its drafts at temperature
``T^2``, not ``T``. ``AssistedCandidateGenerator`` hands the assistant's ``generate`` both the
target's logits processors (a ``TemperatureLogitsWarper(T)`` among them) and a copy of the
generation config (``temperature=T``); ``_get_logits_processor`` merges the custom list into
the non-sampling processors, then appends the config's warpers again. The candidate logits it
returns are those same twice-warped scores, so verification stays lossless (``q`` is the law
the drafts came from); the draft is only sharper than asked (fewer acceptances at ``T < 1``).
"""

from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from benchmarks._transformers_bugs import planted
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.step_record import StepRecord, record_step
from specdec.testing.transformers_record import recording_steps
from specdec.testing.transformers_stream import transformers_stream_sampler, transformers_trace
from tests._tiny_models import noisy_copy, tiny_model

S = specdec.SamplingOptions
LAW = S(temperature=0.7, top_k=5)
DRAFT_LAW = S(temperature=0.7**2, top_k=5)  # transformers warps the assistant twice (notes)
K = 3


@pytest.fixture(scope="module")
def pair() -> tuple[Any, Any]:
    model = tiny_model("llama", vocab=8, seed=0)
    draft = noisy_copy(model, scale=0.3, seed=1)
    draft.generation_config.num_assistant_tokens = K
    draft.generation_config.assistant_confidence_threshold = 0.0  # always K drafts
    return model, draft


def _warped(model: Any, tokens: list[int], options: specdec.SamplingOptions) -> Tensor:
    """``[len(tokens), V]`` float64: the warped row after each prefix of ``tokens``."""
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].double()
    return specdec.warp_probs(
        logits, temperature=options.temperature, top_k=options.top_k, top_p=options.top_p,
        min_p=options.min_p,
    )  # fmt: skip


def _teacher_forced(
    model: Any, draft: Any, prompt: list[int], new: list[int], step: StepRecord
) -> StepRecord:
    """The step's record from rows recomputed on its context (prompt, new tokens before it)."""
    context = prompt + new[: step.position]
    k = step.k
    target = _warped(model, context + list(step.drafted), LAW)[len(context) - 1 :]  # [k+1, V]
    rows = _warped(draft, context + list(step.drafted), DRAFT_LAW)[
        len(context) - 1 : len(context) - 1 + k
    ]
    return record_step(
        torch.tensor(step.drafted, dtype=torch.long), torch.tensor(step.emitted), rows, target,
        position=step.position,
    )  # fmt: skip


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, tuple):
        return len(got) == len(want) and all(_close(g, w) for g, w in zip(got, want, strict=True))
    if want is None or isinstance(want, (int, str)):
        return bool(got == want)
    return abs(got - want) <= 1e-5


def test_record_agrees_with_teacher_forced_rows(pair: tuple[Any, Any]) -> None:
    """Each step's scalars (draft and target rows at the drafts, the final token's law, the
    sketch) equal those of rows recomputed by teacher forcing; the steps tile the new tokens
    from position 0 (the prompt's length subtracted) and emit exactly what ``generate``
    returned, the EOS step the last."""
    model, draft = pair
    sequences: list[tuple[StepRecord, ...]] = []
    sample = transformers_stream_sampler(
        model, max_new_tokens=6, options=LAW, assistant_model=draft, pad_token_id=0,
        record=sequences.append,
    )  # fmt: skip
    prompts = torch.tensor([[2, 3, 4]] * 6)
    tokens = sample(prompts, torch.Generator().manual_seed(0))
    assert len(sequences) == 6
    endings = set()
    for row, steps in zip(tokens.tolist(), sequences, strict=True):
        new = [token for token in row if token >= 0]
        emitted = [token for step in steps for token in step.emitted]
        assert emitted == new
        assert [step.position for step in steps] == [
            sum(len(s.emitted) for s in steps[:i]) for i in range(len(steps))
        ]
        for step in steps:
            endings.add(step.ending)
            assert step.rule == "token" and step.k <= K
            want = _teacher_forced(model, draft, [2, 3, 4], new, step)
            for field in StepRecord.__dataclass_fields__:
                assert _close(getattr(step, field), getattr(want, field)), (field, step, want)
    assert {"correction", "bonus"} <= endings


def test_recording_restores_the_model_and_keeps_the_draws(pair: tuple[Any, Any]) -> None:
    """The hook is an instance attribute only while recording (removed on exit, even after an
    error); the tokens are those of the sampler without a record (same seed)."""
    model, draft = pair
    prompts = torch.tensor([[2, 3]] * 2)
    plain = transformers_stream_sampler(
        model, max_new_tokens=4, options=LAW, assistant_model=draft, pad_token_id=0
    )
    steps: list[Any] = []
    recorded = transformers_stream_sampler(
        model, max_new_tokens=4, options=LAW, assistant_model=draft, pad_token_id=0,
        record=steps.append,
    )  # fmt: skip
    seed = torch.Generator().manual_seed(3)
    assert torch.equal(plain(prompts, seed), recorded(prompts, torch.Generator().manual_seed(3)))
    assert "_get_candidate_generator" not in model.__dict__
    with pytest.raises(RuntimeError, match="inside"), recording_steps(model, 2, "token", print):
        assert "_get_candidate_generator" in model.__dict__
        raise RuntimeError("inside")
    assert "_get_candidate_generator" not in model.__dict__


def test_greedy_and_prompt_lookup_are_recorded(pair: tuple[Any, Any]) -> None:
    """At temperature 0 the rule is ``"greedy"`` and every emitted token past the accepted
    drafts is its row's argmax; prompt lookup (no candidate logits) records one-hot draft rows
    (``q(x) = 1`` at each proposed token)."""
    model, draft = pair
    greedy = transformers_trace(
        model, [[2, 3]], generations=1, max_new_tokens=5, options=S(temperature=0.0),
        generator=torch.Generator().manual_seed(0), assistant_model=draft, pad_token_id=0,
    )  # fmt: skip
    assert greedy.rule == "greedy"
    for step in greedy.sequences[0]:
        accepted = step.accepted
        assert step.emitted[-1] == step.target_argmax[len(step.emitted) - 1] or accepted == len(
            step.emitted
        )
    lookup = transformers_trace(
        model, [[2, 3, 4, 2, 3]], generations=2, max_new_tokens=4, options=LAW,
        generator=torch.Generator().manual_seed(0), prompt_lookup_num_tokens=2, pad_token_id=0,
    )  # fmt: skip
    drafted = [step for steps in lookup.sequences for step in steps if step.k > 0]
    assert drafted and all(set(step.draft_at) == {1.0} for step in drafted)


def _bug_pair(temperature: float, *, scale: float) -> tuple[Any, Any]:
    """A V = 8 pair without EOS whose draft, warped twice by transformers (``T^2``, notes),
    samples the target's row exactly when ``scale = 0`` (its head scaled by ``T``)."""
    model = tiny_model("llama", vocab=8, seed=0)
    draft = noisy_copy(model, scale=scale, seed=1)
    with torch.no_grad():
        draft.lm_head.weight.mul_(temperature)
    for config in (model.generation_config, draft.generation_config):
        config.eos_token_id = None
    draft.generation_config.num_assistant_tokens = K
    draft.generation_config.assistant_confidence_threshold = 0.0
    return model, draft


BUGS = {  # bug: (law, draft noise, bonus temperature, generations of 16 tokens)
    "bonus_temperature": (S(temperature=0.25), 0.0, 4.0, 10),
    "correction_from_p": (S(temperature=0.7), 0.3, 1.0, 6),
    "q_unwarped": (S(temperature=0.5), 0.2, 1.0, 6),
}


@pytest.mark.parametrize("bug", BUGS)
def test_bugs_planted_in_transformers_are_lossy_via_the_record(bug: str) -> None:
    """Each bug planted in transformers' own verification path (``benchmarks/
    _transformers_bugs.py``: the bonus drawn at temperature 4 under a law at 0.25, the
    correction drawn from ``p``, ``q`` the draft's unwarped logits) is LOSSY on the trace
    (family-wise false-fail 1e-6)."""
    law, scale, bonus_temperature, generations = BUGS[bug]
    model, draft = _bug_pair(law.temperature, scale=scale)
    common: dict[str, Any] = {
        "generations": generations, "max_new_tokens": 16, "options": law,
        "assistant_model": draft, "pad_token_id": 0,
    }  # fmt: skip
    with planted(bug, temperature=law.temperature, bonus_temperature=bonus_temperature):
        trace = transformers_trace(
            model, [[2, 3]], generator=torch.Generator().manual_seed(1), **common
        )
    report = audit(as_subject(trace))
    assert report.verdict == "lossy", report.format()


def test_transformers_own_code_is_lossless_on_its_trace(pair: tuple[Any, Any]) -> None:
    """transformers' assisted generation as installed (T = 0.7, top-k 5, k = 3, EOS with real
    mass: cut steps and EOS corrections among the steps), 16 runs of 12 tokens: LOSSLESS,
    with the pooled step outcomes' detectable TV <= 0.6 (false-fail 1e-6, false-pass 1e-3)."""
    model, draft = pair
    trace = transformers_trace(
        model, [[2, 3]], generations=16, max_new_tokens=12, options=LAW,
        generator=torch.Generator().manual_seed(0), assistant_model=draft, pad_token_id=0,
    )  # fmt: skip
    report = audit(as_subject(trace), AuditOptions(min_power_tv=0.6))
    assert report.verdict == "lossless", report.format()
