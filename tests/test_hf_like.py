"""A transformers-like causal LM over the toy models (``specdec.testing.hf_like``).

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import torch

import specdec
from specdec.testing.audit import audit_step
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.audit.scenarios.catalogue import select_scenarios
from specdec.testing.hf_like import ToyCausalLM
from specdec.testing.signatures import batched
from specdec.warp import warp_probs
from tests._audit_engines import ANY_POWER, SMALL

# -- 4. a transformers-like model over the toy models ----------------------------------------------


def _hf_step(shift: int):  # type: ignore[no-untyped-def]
    """An engine-style step written against the transformers interface: one cached pass over
    the prefix, k cached draft passes, one target pass over the k drafts; ``shift`` reads the
    target rows one position late (a classic off-by-one) when 1."""

    @batched
    def step(target, draft, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
        def law(logits):  # type: ignore[no-untyped-def]
            return warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)

        assert target.config.vocab_size == draft.config.vocab_size
        out = draft(prefix, use_cache=True)
        cache, rows, drafts = out.past_key_values, [], []
        logits = out.logits[:, -1]
        for _ in range(k):
            row = law(logits)
            token = specdec.sample(row, specdec.uniforms(generator, (prefix.shape[0],)))
            rows.append(row)
            drafts.append(token)
            out = draft(token[:, None], past_key_values=cache, use_cache=True)
            cache, logits = out.past_key_values, out.logits[:, -1]
        tokens = torch.stack(drafts, 1)
        full = target(torch.cat([prefix, tokens], 1), use_cache=True).logits  # [N, L+k, V]
        length = prefix.shape[1]
        first = length - 1 + shift
        targets = law(full[:, first : first + k + 1].double())
        if shift:  # the last row falls off the end: repeat the last available one
            targets = torch.cat([targets, targets[:, -1:]], 1)[:, : k + 1]
        noise = specdec.uniforms(generator, (prefix.shape[0], k + 1))
        return specdec.verify_tokens(tokens, torch.stack(rows, 1), targets, noise).tokens

    return step


def test_toy_causal_lm_cache_matches_a_full_pass_and_crops() -> None:
    lm = ToyCausalLM(verifier_scenarios()[0].pair.target, dtype=torch.float32)
    ids = torch.tensor([[0, 3, 1, 2]])
    full = lm(ids, use_cache=True)
    assert full.logits.dtype == torch.float32 and full.logits.shape == (1, 4, 4)
    cache = lm(ids[:, :2], use_cache=True).past_key_values
    rest = lm(ids[:, 2:], past_key_values=cache, use_cache=True)
    assert torch.equal(rest.logits, full.logits[:, 2:])
    cache = full.past_key_values
    cache.crop(-2)  # a rejection: drop the last two tokens
    again = lm(torch.tensor([[0]]), past_key_values=cache, use_cache=True)
    assert torch.equal(again.logits[0, -1], lm(torch.tensor([[0, 3, 0]])).logits[0, -1])


def test_an_engine_step_written_for_transformers_models_runs_unchanged() -> None:
    scenarios = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    good = audit_step(
        _hf_step(0),
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        model_interface="transformers",
    )
    assert good.verdict == "lossless", good.format()
    bad = audit_step(
        _hf_step(1),
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        model_interface="transformers",
    )
    assert bad.verdict == "lossy", bad.format()
