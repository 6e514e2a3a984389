"""transformers' own ``generate`` audited as an engine (``specdec.testing.transformers_stream``).

The models are tiny random-initialised transformers built in code (``tests._tiny_models``:
2 layers, V = 8, token 1 the EOS with real mass), the draft a noisy copy of the target
(Gaussian noise of standard deviation 0.3 on every weight). Each audit judges the first
2 new tokens after one prompt, EOS absorbing (9^2 = 81 outcomes), at the default family-wise
false-fail rate 1e-6 and false-pass rate 1e-3 at ``DETECT_TV``. transformers' assisted
generation takes one sequence per call, so these audits are sized for TV 0.25 (about 900
generations each). The same cases sized for TV 0.1 (3,000 to 6,900 generations) were also
LOSSLESS (``docs/audit.md``).

Findings about transformers (5.24) pinned here:

* ``num_assistant_tokens_schedule="heuristic"`` writes the adapted draft length back into
  ``assistant_model.generation_config`` after each call (documented persistence), so a loop
  calling ``generate`` under one seed draws other tokens on a second run: the audit says
  NONDETERMINISTIC. ``transformers_stream_sampler`` restores the field after each call.
* The acceptance test ``rand_like(ratio) <= p/q`` runs in float32, so a draft the target
  forbids (``p = 0``, e.g. outside the target's top-k) is accepted when the 24-bit uniform is
  exactly 0: probability ``2^-24`` per such test. Far below what a stream audit can sample;
  the exact step audit finds it (``tests/test_capture.py``).
"""

from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.models import HFModel
from specdec.testing import audit_stream
from specdec.testing.signatures import batched
from specdec.testing.transformers_stream import generate_options, transformers_stream_sampler
from tests._tiny_models import noisy_copy, tiny_model

EOS = 1  # tiny_model's eos_token_id
DETECT_TV = 0.25
S = specdec.SamplingOptions


def _pair(arch: str) -> tuple[Any, Any]:
    model = tiny_model(arch, vocab=8, seed=0)
    return model, noisy_copy(model, scale=0.3, seed=1)


def test_generate_options_disable_transformers_default_filters() -> None:
    """transformers' defaults filter with top-k 50; the adapter passes every filter."""
    assert generate_options(S()) == {
        "do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": None
    }  # fmt: skip
    assert generate_options(S(temperature=0.5, top_p=0.9, min_p=0.1))["top_p"] == 0.9


def test_same_seed_same_tokens_and_no_side_effect() -> None:
    model, draft = _pair("llama")
    sample = transformers_stream_sampler(
        model, max_new_tokens=3, assistant_model=draft, pad_token_id=0
    )
    prompts = torch.tensor([[2, 3], [4, 5], [2, 3]])
    before = torch.random.get_rng_state()
    first = sample(prompts, torch.Generator().manual_seed(5))
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG restored
    assert torch.equal(first, sample(prompts, torch.Generator().manual_seed(5)))
    assert first.shape == (3, 3) and first.dtype == torch.int64


def test_rows_stop_at_eos_padded_with_minus_one() -> None:
    """A generation that emits EOS ends there: ``-1`` after it, never a pad token."""
    model, draft = _pair("llama")
    sample = transformers_stream_sampler(
        model, max_new_tokens=3, assistant_model=draft, pad_token_id=0
    )
    out = sample(torch.tensor([[2, 3]]).expand(40, 2), torch.Generator().manual_seed(0))
    stopped = (out[:, :2] == EOS).any(1)
    assert bool(stopped.any())  # EOS has real mass here
    for row in out[stopped]:
        end = int((row == EOS).nonzero()[0])
        assert bool((row[end + 1 :] == -1).all())
    assert bool((out[~stopped][:, :2] >= 0).all())


def test_sampling_options_are_refused_in_generate_kwargs() -> None:
    model, _ = _pair("gpt2")
    with pytest.raises(TypeError, match="pass the sampling law as options="):
        transformers_stream_sampler(model, max_new_tokens=2, top_k=3)
    with pytest.raises(TypeError, match="options must be a SamplingOptions"):
        transformers_stream_sampler(model, max_new_tokens=2, options={"top_k": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_new_tokens"):
        transformers_stream_sampler(model, max_new_tokens=0)
    with pytest.raises(ValueError, match="must be on the CPU"):
        transformers_stream_sampler(model.to("meta"), max_new_tokens=2)


FILTERED = S(temperature=0.7, top_k=5, top_p=0.8)
LOOKUP = S(temperature=1.3, top_k=4, min_p=0.2)
CASES = {  # engine, architecture, claimed law, prompt
    "assisted-llama-T1": ("assisted", "llama", S(), [2, 3]),
    "assisted-gpt2-T0.7-topk5-topp0.8": ("assisted", "gpt2", FILTERED, [2, 3]),
    "lookup-qwen2-T1.3-topk4-minp0.2": ("lookup", "qwen2", LOOKUP, [2, 3, 4, 2, 3]),
}


@pytest.mark.parametrize("case", CASES)
def test_transformers_generate_is_lossless(case: str) -> None:
    """transformers' assisted generation (``assistant_model=``, speculative sampling) and its
    prompt lookup (``prompt_lookup_num_tokens=2``; the prompt repeats ``2 3`` so candidates
    are proposed), the first 2 tokens until EOS: LOSSLESS at TV 0.25 (false-fail 1e-6,
    false-pass 1e-3 at 0.25)."""
    engine, arch, options, prompt = CASES[case]
    model, draft = _pair(arch)
    how = {"assistant_model": draft} if engine == "assisted" else {"prompt_lookup_num_tokens": 2}
    sample = transformers_stream_sampler(
        model, max_new_tokens=2, options=options, pad_token_id=0, **how
    )
    report = audit_stream(
        sample, model, prompts=[prompt], new_tokens=2, law=options, eos_token_id=EOS,
        detect_tv=DETECT_TV, min_power_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()
    assert report.detectable_tv <= DETECT_TV


def test_finding_heuristic_draft_length_is_hidden_state() -> None:
    """FINDING about transformers (not specdec): with ``num_assistant_tokens_schedule=
    "heuristic"`` each ``generate`` call writes its adapted draft length into the assistant's
    ``generation_config``, so the same seed gives other tokens on the next call: a loop
    calling ``generate`` directly (6 new tokens, the first 3 judged, so the draft length
    1 to 5 changes which uniforms decide them) is NONDETERMINISTIC (exit 4; the audit draws
    64 generations twice under one seed and compares them).
    The adapter restores the field, and the same engine is then deterministic."""
    model, draft = _pair("llama")
    draft.generation_config.num_assistant_tokens_schedule = "heuristic"
    draft.generation_config.num_assistant_tokens = 2  # 4 after a full match, else 1
    kwargs = {"assistant_model": draft, "do_sample": True, "top_k": 0, "max_new_tokens": 6}

    @batched
    def direct(prompts: Tensor, generator: torch.Generator) -> Tensor:
        seed = int(torch.randint(2**31, (), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            rows = [model.generate(row[None], pad_token_id=0, **kwargs)[0, 2:5] for row in prompts]
        return torch.stack([torch.cat([r, torch.full((3 - len(r),), -1)]) for r in rows])

    common: dict[str, Any] = {"prompts": [[2, 3]], "new_tokens": 3, "eos_token_id": EOS}
    before = draft.generation_config.num_assistant_tokens
    model.generate(torch.tensor([[2, 3]]), pad_token_id=0, **kwargs)
    assert draft.generation_config.num_assistant_tokens != before  # transformers wrote it
    draft.generation_config.num_assistant_tokens = 2
    report = audit_stream(direct, model, samples=64, **common)
    assert report.verdict == "nondeterministic", report.format()
    draft.generation_config.num_assistant_tokens = 2
    adapted = transformers_stream_sampler(
        model, max_new_tokens=6, assistant_model=draft, pad_token_id=0
    )
    prompts = torch.tensor([[2, 3]]).expand(16, 2)
    first = adapted(prompts, torch.Generator().manual_seed(0))
    assert torch.equal(first, adapted(prompts, torch.Generator().manual_seed(0)))
    assert draft.generation_config.num_assistant_tokens == 2  # restored after every call


@pytest.mark.parametrize(
    "options", [S(temperature=1.3, top_k=5), S(temperature=0.7, top_p=0.8)], ids=["topk", "topp"]
)
def test_generate_speculative_on_tiny_transformers_until_eos(
    options: specdec.SamplingOptions,
) -> None:
    """specdec's own ``generate_speculative`` (k = 3) on the same tiny Llama pair, stopping
    at EOS, the first 3 tokens (9^3 = 729 outcomes): LOSSLESS at TV 0.1 (false-fail 1e-6,
    false-pass 1e-3 at 0.1)."""
    model, draft_model = _pair("llama")
    target, draft = HFModel(model), HFModel(draft_model)

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        return specdec.generate_speculative(
            target, draft, prompts, k=3, max_new_tokens=3, generator=generator,
            target_options=options, eos_token_id=EOS,
        ).tokens  # fmt: skip

    report = audit_stream(
        sample, model, prompts=[[2, 3]], new_tokens=3, law=options, eos_token_id=EOS,
        detect_tv=0.1,
    )  # fmt: skip
    assert report.verdict == "lossless", report.format()
