"""The audit for real engines: their conventions (warping, greedy, options they reject, reserved
ids, blocks above the optimum), realistic inputs (dtype, device, V in the thousands) and a
transformers-like model wrapper.

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import json
import math
import textwrap
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import torch

import specdec
from specdec.cli import main
from specdec.models.toy import ToyModel, ToyPair
from specdec.testing import zoo
from specdec.testing.audit import InvalidOutputError, audit_step, audit_verifier
from specdec.testing.audit.battery import step_scenarios, verifier_scenarios
from specdec.testing.audit.catalogue import scenario_catalogue, select_scenarios
from specdec.testing.audit.conventions import resolve_device, warping_distance
from specdec.testing.audit.large import dyadic_pair, large_pair
from specdec.testing.audit.reserved import without_reserved
from specdec.testing.audit.sampler import samples_for_tv_two_sample
from specdec.testing.audit.scenario import Scenario, acceptance_mass, check_exercises_acceptance
from specdec.testing.hf_like import ToyCausalLM
from specdec.testing.signatures import batched
from specdec.testing.stats import min_detectable_tv_two_sample
from specdec.warp import warp_probs

SMALL = 20_000
ANY_POWER = 1.0  # these tests are about conventions, at few samples: any power accepted


@batched
def _reference(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


# -- (f) every scenario exercises acceptance -----------------------------------------------------


@pytest.mark.parametrize("level", ["verifier", "step"])
def test_every_catalogued_scenario_can_accept_a_draft(level: str) -> None:
    for name, (scenario, _) in scenario_catalogue(level).items():
        assert acceptance_mass(scenario, step=level == "step") > 0, name


def test_a_scenario_whose_filtered_rows_never_overlap_is_refused() -> None:
    """The step battery's former temperature-0.5 top-2 scenario (prefix 2): the filtered draft
    [0.64, 0, 0.36, 0] and target [0, 0.39, 0, 0.61] are disjoint."""
    fixed = next(s for s in step_scenarios() if s.name == "temp-topk-v4-k2")
    former = replace(fixed, prefix=(2,))
    assert acceptance_mass(former, step=True) == 0
    with pytest.raises(ValueError, match="never overlap"):
        check_exercises_acceptance([former], step=True)
    half = (Fraction(1, 2), Fraction(1, 2))
    coin = ToyModel.from_rows(2, 1, [half] * 3)
    tied = Scenario("coin", "uniform rows", ToyPair(coin, coin), (0,), 1, temperature=0.0)
    with pytest.raises(ValueError, match="tie"):
        check_exercises_acceptance([tied], step=True)


# -- (b, c) greedy scenarios, choosing scenarios, options an engine rejects ------------------------


def test_scenarios_are_chosen_by_name_and_unknown_names_are_refused() -> None:
    chosen = select_scenarios(["greedy-v5-k1", "plain-v4-k2"], "step")
    assert [s.name for s in chosen] == ["greedy-v5-k1", "plain-v4-k2"]
    with pytest.raises(ValueError, match="plain-v4-k2"):  # the message lists the names
        select_scenarios(["nope"], "step")
    with pytest.raises(ValueError, match="distinct"):
        select_scenarios(["plain-v4-k2", "plain-v4-k2"], "step")


@batched
def _greedy_only(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """A greedy engine: drafts and verifies by argmax; refuses sampling."""
    if temperature != 0:
        raise NotImplementedError("this engine only decodes greedily")
    return zoo.reference_step(
        target_logits, draft_logits, prefix, k, generator, temperature=0.0, top_k=None, top_p=None
    )


@batched
def _greedy_skipping_bonus(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """Wrong greedy engine: after all drafts are accepted it emits the draft's next argmax."""
    out = _greedy_only(target_logits, draft_logits, prefix, k, generator, **options)
    full = out[:, -1] >= 0
    context = torch.cat([prefix, out[:, :-1]], dim=1)
    out[full, -1] = draft_logits(context).argmax(-1)[full]
    return out


def test_greedy_scenarios_audit_a_greedy_only_engine() -> None:
    greedy = select_scenarios(["greedy-v5-k3", "greedy-v5-k1"], "step")
    good = audit_step(_greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=greedy)
    assert good.verdict == "lossless", good.format()
    bad = audit_step(
        _greedy_skipping_bonus, min_power_tv=ANY_POWER, samples=2_000, scenarios=greedy
    )
    assert bad.verdict == "lossy" and bad.scenarios[0].impossible_outcomes > 0, bad.format()


@batched
def _without_top_p(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    if top_p is not None:
        raise ValueError("top_p is not supported")
    return zoo.reference_step(
        target_logits,
        draft_logits,
        prefix,
        k,
        generator,
        temperature=temperature,
        top_k=top_k,
        top_p=None,
    )


def test_a_scenario_whose_options_the_engine_rejects_is_reported_not_audited() -> None:
    report = audit_step(_without_top_p, min_power_tv=ANY_POWER, samples=SMALL)
    rejected = [s for s in report.scenarios if s.rejected]
    assert [s.name for s in rejected] == ["topp-v5-k1"] and rejected[0].samples == 0
    assert "top_p is not supported" in rejected[0].rejected
    assert report.verdict == "lossless", report.format()
    assert "1 of 5 scenarios NOT AUDITED" in report.format()
    assert "OPTIONS REJECTED" in report.format()
    # the headline and the JSON say so too; the exit code is the audited scenarios' verdict
    assert report.headline().endswith(
        "; 1 of 5 scenario(s) NOT AUDITED (options rejected: topp-v5-k1)"
    )
    document = json.loads(report.to_json())
    assert document["not_audited"] == ["topp-v5-k1"] and document["exit_code"] == 0
    assert document["detectable_tv"] < 1.0  # the rejected scenario's vacuous power is not counted


def test_the_plain_scenario_may_not_be_rejected_and_all_rejected_is_an_error() -> None:
    with pytest.raises(NotImplementedError, match="greedily"):  # plain: a crash
        audit_step(
            _greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=step_scenarios()[:2]
        )
    with pytest.raises(ValueError, match="every scenario"):
        audit_step(
            _greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=step_scenarios()[1:2]
        )


# -- (a) the engine's own warping ------------------------------------------------------------------


def _exactly_k(logits, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """An engine's warping whose top-k keeps exactly k tokens (torch.topk: no boundary ties)."""
    if top_k is None or temperature == 0:
        return warp_probs(logits, temperature=temperature, top_p=top_p)
    kept = torch.topk(logits, top_k, dim=-1).indices
    masked = torch.full_like(logits, -math.inf).scatter(-1, kept, logits.gather(-1, kept))
    return warp_probs(masked, temperature=temperature, top_p=top_p)


def _engine_step(verify):  # type: ignore[no-untyped-def]
    @batched
    def step(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
        def law(logits):  # type: ignore[no-untyped-def]
            return _exactly_k(logits, temperature=temperature, top_k=top_k, top_p=top_p)

        context, rows = prefix.long(), []
        for _ in range(k):
            row = law(draft_logits(context))
            token = specdec.sample(row, specdec.uniforms(generator, (context.shape[0],)))
            rows.append(row)
            context = torch.cat([context, token[:, None]], dim=1)
        length = prefix.shape[1]
        targets = [law(target_logits(context[:, : length + i])) for i in range(k + 1)]
        noise = specdec.uniforms(generator, (context.shape[0], k + 1))
        drafts, draft_rows = context[:, length:], torch.stack(rows, 1)
        return verify(drafts, draft_rows, torch.stack(targets, 1), noise).tokens

    return step


def test_an_engine_keeping_exactly_k_tokens_is_lossless_wrt_its_warping_and_flagged() -> None:
    """hot-v5-k3: the two top-k conventions' 4-token laws differ by TV 0.164 (exact)."""
    hot = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    assert warping_distance(hot[1], _exactly_k) == pytest.approx(0.1641, abs=1e-4)
    engine = _engine_step(specdec.verify_tokens)
    own = audit_step(
        engine, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot, target_warp=_exactly_k
    )
    assert own.verdict == "lossless", own.format()
    assert own.scenarios[0].warping_tv == 0 and own.scenarios[1].warping_tv > 0.16
    assert "warping DIFFERS from specdec's" in own.format() and "hot-v5-k3 0.1641" in own.format()
    theirs = audit_step(engine, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot)
    assert theirs.verdict == "lossy" and theirs.scenarios[1].lossy, theirs.format()
    same = audit_step(
        zoo.reference_step,
        min_power_tv=ANY_POWER,
        samples=2_000,
        scenarios=hot,
        target_warp=warp_probs,
    )
    assert "agrees with specdec's" in same.format()


def test_wrong_verification_is_lossy_whichever_warping_defines_the_target() -> None:
    """Resampling from p after a rejection (not the residual): TV >= 0.05 here."""
    wrong = _engine_step(zoo.rule("resample_from_target"))
    hot = select_scenarios(["hot-v5-k3"], "step")
    for warp in (_exactly_k, None):
        report = audit_step(
            wrong, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot, target_warp=warp
        )
        assert report.verdict == "lossy", report.format()


# -- (d) reserved ids ------------------------------------------------------------------------------


def test_reserved_ids_get_probability_zero_and_an_emitted_one_is_invalid() -> None:
    original = verifier_scenarios()[1]  # V = 3: the toy tokens move to ids 2, 3, 4
    scenario = without_reserved(original, (0, 1))
    assert scenario.pair.target.vocab_size == 5 and scenario.prefix == (2,)
    for model in (scenario.pair.target, scenario.pair.draft):
        assert all(row[0] == row[1] == 0 and sum(row) == 1 for row in model.rows)
    assert scenario.pair.target.probs((2, 3)) == (0, 0, *original.pair.target.probs((0, 1)))
    assert scenario.pair.draft.probs((4,)) == (0, 0, *original.pair.draft.probs((2,)))
    large = without_reserved(replace(original, pair=large_pair(16, seed=0)), (1,))
    assert large.pair.target.float_table[:, 1].abs().sum() == 0
    report = audit_verifier(_reference, min_power_tv=ANY_POWER, samples=5_000, reserved_ids=[0, 1])
    assert report.verdict == "lossless", report.format()
    assert "reserved ids 0, 1 kept out" in report.scenarios[0].description

    @batched
    def emits_eos(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        out = _reference(draft_tokens, draft_probs, target_probs, generator)
        return torch.cat([torch.ones_like(out[:, :1]), out[:, 1:]], 1)  # EOS = 1 first

    with pytest.raises(InvalidOutputError, match=r"reserved token id\(s\) \[1\]"):
        audit_verifier(
            emits_eos,
            min_power_tv=ANY_POWER,
            samples=500,
            reserved_ids=[1],
            scenarios=verifier_scenarios()[:1],
        )
    with pytest.raises(ValueError, match=">= 0"):
        audit_verifier(_reference, min_power_tv=ANY_POWER, samples=500, reserved_ids=[-1])


# -- (e) more tokens per call than one step emits --------------------------------------------------


def _two_steps(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """Lossless single-sequence loop that always returns k+1 tokens: whole steps, concatenated,
    cut at k+1 (a fixed cut of a lossless process)."""
    out = torch.empty(0, dtype=torch.int64)

    def batch(logits):  # type: ignore[no-untyped-def]
        return lambda ids: logits(ids[0])[None]

    while out.shape[0] < k + 1:
        context = torch.cat([prefix, out])[None]
        block = zoo.reference_step(
            batch(target_logits), batch(draft_logits), context, k, generator, **options
        )[0]
        out = torch.cat([out, block[block >= 0]])
    return out[: k + 1]


def test_blocks_longer_than_one_step_are_invalid_output_unless_they_may_span_steps() -> None:
    """3.00 tokens per call against an optimum below 3 (k = 2): not one step's output, so the
    verdict is invalid-output (exit 5); ``blocks_span_steps`` judges the law alone (lossless);
    the one-step reference (negative control) is never flagged."""
    scenarios = select_scenarios(["plain-v4-k2"], "step")
    flagged = audit_step(_two_steps, min_power_tv=ANY_POWER, samples=600, scenarios=scenarios)
    assert flagged.verdict == "invalid-output" and flagged.exit_code == 5, flagged.format()
    assert flagged.scenarios[0].above_optimum and "ABOVE OPTIMUM" in flagged.format()
    assert flagged.scenarios[0].mean_tokens == 3.0 > flagged.scenarios[0].optimal_tokens
    assert "not one step's output" in flagged.headline()
    assert "--blocks-span-steps" in flagged.headline()
    assert json.loads(flagged.to_json())["exit_code"] == 5
    spanning = audit_step(
        _two_steps,
        min_power_tv=ANY_POWER,
        samples=600,
        scenarios=scenarios,
        blocks_span_steps=True,
    )
    assert spanning.verdict == "lossless" and spanning.exit_code == 0, spanning.format()
    assert "ABOVE OPTIMUM (allowed)" in spanning.format()


def test_block_verification_beats_token_level_but_not_the_coupling_bound() -> None:
    """Block verification is one lossless step emitting more than token-level rejection sampling
    (1.73 against 1.62 tokens on block-v3-k2): the flag's bound is the coupling bound (1 + sum
    of 1 - TV of the i-token laws), which no lossless step exceeds, so it is not flagged."""
    scenarios = select_scenarios(["block-v3-k2"], "verifier")
    report = audit_verifier(
        zoo.rule("block_verifier"), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios
    )
    (row,) = report.scenarios
    assert report.verdict == "lossless", report.format()
    assert row.optimal_tokens < row.mean_tokens <= (row.max_tokens or 0.0)
    assert not row.above_optimum
    plain = audit_step(
        zoo.reference_step, min_power_tv=ANY_POWER, samples=5_000, scenarios=scenarios
    )
    assert not plain.scenarios[0].above_optimum and "ABOVE OPTIMUM" not in plain.format()


# -- 4. realistic inputs: dtype, device, V in the thousands ---------------------------------------


def test_rows_in_bfloat16_reach_the_verifier_exactly_and_bugs_are_still_caught() -> None:
    seen: list[torch.dtype] = []

    @batched
    def in_bfloat16(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        seen.append(target_probs.dtype)
        return _reference(draft_tokens, draft_probs.double(), target_probs.double(), generator)

    scenarios = verifier_scenarios()[:3]
    good = audit_verifier(
        in_bfloat16,
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        dtype=torch.bfloat16,
    )
    assert good.verdict == "lossless" and set(seen) == {torch.bfloat16}, good.format()
    moved = dyadic_pair(scenarios[0].pair)
    rows = moved.target.float_table
    assert torch.equal(rows.to(torch.bfloat16).double(), rows) and bool((rows.sum(-1) == 1).all())
    bad = audit_verifier(
        zoo.rule("resample_from_target"),
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        dtype=torch.bfloat16,
    )
    assert bad.verdict == "lossy", bad.format()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_step_given_narrow_logits_is_audited_against_their_warping(dtype: torch.dtype) -> None:
    """The target is the warping of the rounded logits (bfloat16 keeps 8 significant bits of
    each logit), so a step that warps what it is given is lossless."""
    dtypes: list[torch.dtype] = []

    @batched
    def step(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
        dtypes.append(target_logits(prefix).dtype)
        return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)

    scenarios = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    report = audit_step(
        step, min_power_tv=ANY_POWER, samples=5_000, scenarios=scenarios, dtype=dtype
    )
    assert report.verdict == "lossless" and set(dtypes) == {dtype}, report.format()


def test_an_absent_device_is_refused_before_anything_runs() -> None:
    assert resolve_device(None) is None and resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="cpu"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            audit_verifier(_reference, min_power_tv=ANY_POWER, samples=500, device="cuda")


def test_a_vocabulary_of_2048_tokens_is_pooled_by_expected_count_and_audited() -> None:
    """2048^2 completed blocks, pooled before sampling into the cells of expected count >= 5;
    resampling from p after a rejection is at least 0.20 from the target in TV here (its first
    token's law alone: 1/2 sum |min(p, q) - beta p| = 0.204, beta = 0.715), above the detectable
    TV of 0.13 at 20,000 samples (227 cells)."""
    scenarios = select_scenarios(["large-v2048-k1"], "verifier")
    good = audit_verifier(_reference, min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios)
    (result,) = good.scenarios
    assert good.verdict == "lossless" and result.vocab == 2048, good.format()
    assert 10 < result.num_cells < SMALL / 5 + 2 and result.detectable_tv < 0.15
    bad = audit_verifier(
        zoo.rule("resample_from_target"), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios
    )
    assert bad.verdict == "lossy", bad.format()


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


# -- (a) the engine's own target-only sampler: a two-sample test -----------------------------------


def _exactly_k_sampler(logits, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """An engine's target-only sampler: its exactly-k warping, then torch.multinomial."""
    probs = _exactly_k(logits.double(), temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def test_an_engine_audited_against_its_own_sampler() -> None:
    """Two-sample L1 test per scenario at level 1e-6 / S: the correct engine passes; wrong
    verification (resampling from p: TV about 0.18 in hot-v5-k3 under the engine's warping, the
    one-sample audit's estimate) is caught at 50,000 samples, where the two-sample test detects
    TV 0.13; the sampler's warping is flagged as differing from specdec's (exact TV 0.164)."""
    scenarios = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    engine = _engine_step(specdec.verify_tokens)
    good = audit_step(
        engine,
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        target_sampler=_exactly_k_sampler,
    )
    assert good.verdict == "lossless", good.format()
    plain, hot = good.scenarios
    assert not plain.warping_differs and hot.warping_differs and hot.warping_estimated
    assert hot.warping_tv == pytest.approx(0.164, abs=0.03)
    assert "estimated from its sampler" in good.format() and "two-sample" in good.signature
    wrong = _engine_step(zoo.rule("resample_from_target"))
    bad = audit_step(
        wrong,
        min_power_tv=ANY_POWER,
        samples=50_000,
        scenarios=scenarios[1:],
        target_sampler=_exactly_k_sampler,
    )
    assert bad.verdict == "lossy" and bad.scenarios[0].detectable_tv < 0.15, bad.format()
    assert bad.scenarios[0].deciding_test == "two-sample L1"
    assert bad.scenarios[0].deciding_p_value == bad.scenarios[0].p_value <= 1e-6


def test_the_sampler_path_sizes_scenarios_from_detect_tv() -> None:
    """detect_tv 0.15: each scenario draws the two-sample formula's size at level 1e-6 / S
    (S = 1 here); the correct engine passes at that power, the wrong one (resampling from p,
    TV about 0.18 > 0.15 in hot-v5-k3) is rejected at it (negative control)."""
    hot = select_scenarios(["hot-v5-k3"], "step")
    options = {"detect_tv": 0.15, "scenarios": hot, "target_sampler": _exactly_k_sampler}
    good = audit_step(_engine_step(specdec.verify_tokens), **options)
    n, plan = samples_for_tv_two_sample(hot[0], 0.15, 1e-6, 1e-3)
    (row,) = good.scenarios
    assert good.verdict == "lossless" and good.exit_code == 0, good.format()
    assert good.detect_tv == 0.15 and row.samples == n and row.num_cells == plan.pooled.numel()
    assert row.detectable_tv <= 0.15 and row.samples_to_decide == 0
    assert row.deciding_test == "two-sample L1" and row.deciding_p_value == row.p_value
    assert "no deviation of TV >= " in good.headline() and "(false-fail 1e-06" in good.headline()
    assert "(two-sample L1)" in good.format()
    bad = audit_step(_engine_step(zoo.rule("resample_from_target")), **options)
    assert bad.verdict == "lossy" and bad.exit_code == 1, bad.format()


def test_the_sampler_path_is_inconclusive_below_the_minimum_power() -> None:
    """2,000 samples detect only TV 0.3 or so: INCONCLUSIVE (exit 3) with the size that would
    decide, which is calibrated: at it the two-sample test detects the minimum 0.05 on its own
    cells, and one sample fewer it would not."""
    plain = select_scenarios(["plain-v4-k2"], "step")
    report = audit_step(
        _engine_step(specdec.verify_tokens),
        samples=2_000,
        scenarios=plain,
        target_sampler=_exactly_k_sampler,
    )
    (row,) = report.scenarios
    assert report.verdict == "inconclusive" and report.exit_code == 3, report.format()
    assert row.detectable_tv > 0.05 and report.min_power_tv == 0.05
    needed, plan = samples_for_tv_two_sample(plain[0], 0.05, 1e-6, 1e-3)
    assert row.samples_to_decide == needed and f"{needed} samples per scenario" in (
        report.headline()
    )
    cells = plan.pooled.numel()
    assert min_detectable_tv_two_sample(cells, needed, 1e-6, 1e-3) <= 0.05
    assert min_detectable_tv_two_sample(cells, needed - 1, 1e-6, 1e-3) > 0.05


@batched
def _global_rng_engine(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """The correct engine, seeded from torch's global RNG instead of ``generator``."""
    own = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
    step = _engine_step(specdec.verify_tokens)
    return step(target_logits, draft_logits, prefix, k, own, **options)


def test_the_sampler_path_honours_allow_nondeterministic() -> None:
    plain = select_scenarios(["plain-v4-k2"], "step")
    options = {"detect_tv": 0.2, "scenarios": plain, "target_sampler": _exactly_k_sampler}
    strict = audit_step(_global_rng_engine, **options)
    assert strict.verdict == "nondeterministic" and strict.exit_code == 4, strict.format()
    allowed = audit_step(_global_rng_engine, allow_nondeterministic=True, **options)
    assert allowed.verdict == "lossless" and allowed.exit_code == 0, allowed.format()


# -- 4. ragged per-row k ---------------------------------------------------------------------------


def _ragged(off_by_one: bool):  # type: ignore[no-untyped-def]
    """A batched verifier with per-row k: each group of rows with k_n drafts is verified on its
    first k_n drafts; ``off_by_one`` takes the bonus token from p_{k_n - 1} (a classic slip)."""

    @batched
    def verifier(draft_tokens, draft_probs, target_probs, generator, *, num_drafts):  # type: ignore[no-untyped-def]
        rows, k = draft_tokens.shape
        noise = specdec.uniforms(generator, (rows, k + 1))
        out = torch.full((rows, k + 1), -1, dtype=torch.int64)
        for drafts in range(1, k + 1):
            group = num_drafts == drafts
            if not bool(group.any()):
                continue
            target = target_probs[group, : drafts + 1].clone()
            if off_by_one:
                target[:, drafts] = target_probs[group, drafts - 1]
            verdict = specdec.verify_tokens(
                draft_tokens[group, :drafts],
                draft_probs[group, :drafts],
                target,
                noise[group, : drafts + 1],
            )
            out[group, : drafts + 1] = verdict.tokens
        return out

    return verifier


def test_ragged_per_row_k_is_audited_with_its_convention() -> None:
    """A bonus token from p_{k_n - 1} instead of p_{k_n} emits outcomes the target forbids in
    both scenarios (a certain rejection; estimated TV 0.25 and 0.72 at 200,000 samples) and is
    caught; the correct one passes at the mean optimum over k_n."""
    scenarios = [s for s in verifier_scenarios() if s.name in {"context-v4-k2", "equal-v4-k3"}]
    good = audit_verifier(
        _ragged(False), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios, ragged=True
    )
    assert good.verdict == "lossless", good.format()
    assert good.scenarios[1].optimal_tokens == 3.0  # p == q, k = 3: (2 + 3 + 4) / 3
    bad = audit_verifier(
        _ragged(True), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios, ragged=True
    )
    assert bad.verdict == "lossy", bad.format()
    with pytest.raises(ValueError, match="batched verifier"):
        audit_verifier(specdec.verify_tokens, ragged=True)

    @batched
    def too_long(draft_tokens, draft_probs, target_probs, generator, *, num_drafts):  # type: ignore[no-untyped-def]
        return torch.zeros(draft_tokens.shape[0], draft_tokens.shape[1] + 1, dtype=torch.int64)

    with pytest.raises(InvalidOutputError, match="num_drafts"):
        audit_verifier(
            too_long, min_power_tv=ANY_POWER, samples=500, scenarios=scenarios, ragged=True
        )
