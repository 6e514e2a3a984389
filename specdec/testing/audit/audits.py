"""``audit_verifier`` and ``audit_step``: plan the battery, run it, report.

Both audits share one skeleton: fix every scenario's cells, optimum and share of the error rate
before drawing (``plan``), draw and complete the audited function's blocks scenario by scenario
(``run``), then test and decide (``report``). They differ in what is audited: a verifier is handed
draft blocks drafted from the toy draft, a step drafts, warps and verifies on its own.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal, cast, overload

import torch

from specdec._checks import check_finite, check_int, check_positive_int, check_rate
from specdec.testing.audit.battery import Scenario, WarpFn, step_scenarios, verifier_scenarios
from specdec.testing.audit.conventions import (
    WARPING_TOLERANCE,
    engine_scenarios,
    resolve_device,
    warping_distance,
)
from specdec.testing.audit.exact import ExactAuditReport, audit_exact
from specdec.testing.audit.plan import (
    DETECT_TV_BATCHED,
    DETECT_TV_SINGLE,
    MIN_POWER_TV,
    PlanScenario,
    ScenarioPlan,
    chunk_sizes,
    plan_step_scenario,
    plan_verifier_scenario,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.audit.ragged import ragged_optimum
from specdec.testing.audit.report import (
    AuditReport,
    ScenarioResult,
    decide_by_holm,
    progress_line,
    rejected_result,
    scenario_result,
    verdict,
)
from specdec.testing.audit.run import (
    Complete,
    Draw,
    Inputs,
    collect_evidence,
    complete_step,
    complete_verifier,
    probe_options,
    step_draw,
    threads,
    verifier_draw,
)
from specdec.testing.audit.sampler import SamplerFn, audit_with_sampler
from specdec.testing.signatures import (
    StepFn,
    VerifierFn,
    is_batched,
    takes_uniforms,
    verifier_from_rule,
)
from specdec.types import VerifyRule

__all__ = ["Progress", "audit_step", "audit_verifier", "check_audit_options"]

Progress = Callable[[str], None]
"""Called with one line per finished scenario."""

RULE_SIGNATURE = "VerifyRule (uniforms in, Verification out; the audit draws the uniforms)"
BATCHED_VERIFIER = "batched verifier (generator in, [N, k+1] -1-padded blocks out)"
SINGLE_VERIFIER = "single-sequence verifier (generator in, one block out)"
BATCHED_STEP = "batched step (logits callables and generator in)"
SINGLE_STEP = "single-sequence step (logits callables and generator in)"


@overload
def audit_verifier(
    fn: VerifierFn | VerifyRule,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    exact: Literal[False] = False,
    reserved_ids: Sequence[int] = (),
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    ragged: bool = False,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
    num_threads: int | None = 1,
) -> AuditReport: ...


@overload
def audit_verifier(
    fn: VerifierFn | VerifyRule,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    exact: Literal[True],
    reserved_ids: Sequence[int] = (),
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    ragged: bool = False,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
    num_threads: int | None = 1,
) -> ExactAuditReport: ...


def audit_verifier(
    fn: VerifierFn | VerifyRule,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    exact: bool = False,
    reserved_ids: Sequence[int] = (),
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    ragged: bool = False,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
    num_threads: int | None = 1,
) -> AuditReport | ExactAuditReport:
    """Audit a verifier: does its emitted block complete to the target's law?

    The criterion: the emitted block, completed to ``k+1`` tokens by sampling the target, must
    have exactly the target's joint law of ``k+1`` tokens (``proofs/theory.md`` claim 2). Each
    scenario tests it with an e-process, the L1 test and the G test; the error-rate split is
    documented in ``specdec.testing.audit.plan``.

    Args:
        fn: ``fn(draft_tokens [k], draft_probs [k, V], target_probs [k+1, V], generator)
            -> LongTensor[n]``, or the batched form (leading ``N``, result ``[N, k+1]``
            ``-1``-padded) marked with ``@specdec.testing.signatures.batched``, or a
            ``VerifyRule`` (``uniforms`` as its fourth parameter, a ``Verification`` out):
            detected from its parameters, run batched on uniforms the audit draws. The
            report's ``signature`` says which form ran.
        batched: override the ``@batched`` marker (ignored for a ``VerifyRule``).
        samples: per scenario, fixed (the report then states the power it bought); at most
            one of ``samples`` and ``detect_tv``.
        false_fail_rate: family-wise over the battery.
        false_pass_rate: per scenario, at the printed detectable distance.
        detect_tv: size each scenario to detect a deviation of total variation ``>= detect_tv``
            over its cells with false-pass rate ``false_pass_rate`` (``plan.samples_for_tv``);
            default 0.01 for a batched function or rule, 0.05 for a single-sequence one
            (called once per sample; timings in ``benchmarks/README.md``).
        min_power_tv: a passing audit some of whose scenarios detect only a larger distance is
            ``inconclusive``, with the sample size that would decide (default: 0.05, or
            ``detect_tv`` when that is larger).
        allow_nondeterministic: judge the law alone: a function whose blocks differ under the
            same generator seed (it draws from torch's global RNG, say) is not
            ``nondeterministic`` but lossless, lossy or inconclusive by its law.
        blocks_span_steps: accept blocks above the optimum (``above_optimum``: more tokens
            per call than one step emits on average, e.g. a loop returning ``k+1`` tokens over
            two steps) and judge the law alone; without it such an audit is
            ``invalid-output`` (exit 5; ``report.verdict``).
        num_threads: torch intra-op threads while the audit runs (default 1: its tensors are
            small, and on a shared machine torch's thread pool costs more than it saves;
            ``None`` keeps torch's setting; measurements in ``benchmarks/README.md``).
        seed: everything the audit draws derives from it.
        scenarios: the battery (default ``verifier_scenarios()``).
        progress: called with one line per finished scenario.
        exact: run the exact audit instead (``specdec.testing.audit.exact.audit_exact``: the
            rule's law from its own decisions, no sampling; ``samples``, the error rates,
            ``batched`` and ``progress`` do not apply; a function that does not take uniforms
            gets ``cannot decide``). Default battery: the verifier battery and 16 searched
            pairs.
        reserved_ids: token ids the engine reserves: every toy row gives them probability 0
            and an emitted one is an invalid output (``specdec.testing.audit.reserved``).
        dtype: the rows' dtype as the function gets them (float64, float32, bfloat16); in a
            narrow dtype the pairs are moved to the ``1/128`` grid, exact in it
            (``specdec.testing.audit.conventions``).
        device: where the rows and the function's generator live (``"cuda"`` must be present).
        ragged: each row drafts its own ``k_n`` (uniform on ``1..k``), told by the keyword
            ``num_drafts``; a batched verifier only (``specdec.testing.audit.ragged`` has the
            convention); the optimum is the mean over ``k_n``.

    Returns:
        An ``AuditReport`` (an ``ExactAuditReport`` with ``exact=True``). Exceptions raised by
        ``fn`` propagate; an output that is not an emitted block raises
        ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an invalid option (``check_audit_options``), before ``fn`` is
            ever called; an absent device, an unsupported dtype, reserved ids leaving fewer
            than 2 tokens.
    """
    if exact:
        if reserved_ids or dtype is not None or device is not None or ragged:
            raise ValueError("exact=True takes none of reserved_ids, dtype, device, ragged.")
        return audit_exact(fn, scenarios=scenarios, seed=seed)
    check_audit_options(
        samples=samples,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        detect_tv=detect_tv,
        min_power_tv=min_power_tv,
        seed=seed,
        num_threads=num_threads,
    )
    on = resolve_device(device)
    battery = engine_scenarios(
        scenarios or verifier_scenarios(), step=False, reserved=reserved_ids, dtype=dtype
    )
    name = _name(fn)
    verifier: VerifierFn
    if takes_uniforms(fn):  # a VerifyRule: the audit draws the uniforms it is given
        verifier, is_batch = verifier_from_rule(cast(VerifyRule, fn)), True
        signature = RULE_SIGNATURE
    else:
        verifier = cast(VerifierFn, fn)
        is_batch = is_batched(fn) if batched is None else batched
        signature = BATCHED_VERIFIER if is_batch else SINGLE_VERIFIER
    if ragged and (not is_batch or takes_uniforms(fn)):
        raise ValueError(
            "ragged=True needs a batched verifier taking num_drafts (@batched or batched=True), "
            "not a single-sequence one or a VerifyRule."
        )
    inputs = Inputs(dtype=dtype, device=on, reserved=tuple(reserved_ids), ragged=ragged)
    return _audit(
        "verifier",
        name,
        battery,
        _ragged_plan if ragged else plan_verifier_scenario,
        verifier_draw(verifier, is_batch, inputs=inputs),
        complete_verifier,
        signature=signature,
        is_batch=is_batch,
        samples=samples,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        seed=seed,
        progress=progress,
        device=on,
        detect_tv=detect_tv,
        min_power_tv=min_power_tv,
        allow_nondeterministic=allow_nondeterministic,
        blocks_span_steps=blocks_span_steps,
        num_threads=num_threads,
    )


def audit_step(
    fn: StepFn,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    target_warp: WarpFn | None = None,
    reserved_ids: Sequence[int] = (),
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    model_interface: Literal["logits", "transformers"] = "logits",
    target_sampler: SamplerFn | None = None,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
    num_threads: int | None = 1,
) -> AuditReport:
    """Audit a whole step (drafting, warping, verification) against the *warped* target.

    ``fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p)``
    returns the emitted block; the logits callables are toy models behind a plain function
    (``log`` of exact rational rows, ``-inf`` for zero probabilities). The audit picks the
    sampling options per scenario; the target law is that of
    ``warp_probs(target_logits(context), temperature, top_k, top_p)`` at every context, and
    the optimum assumes the draft uses the same options. Arguments as in ``audit_verifier``
    (default battery ``step_scenarios()``), and:

    Args:
        target_warp: the engine's warping, ``warp(logits [N, V], *, temperature, top_k,
            top_p) -> probs [N, V]``: the target is then its warped law, so the verdict is
            about verification given the engine's warping, and each scenario reports the TV
            between that law and ``warp_probs``'s (``warping_tv``; ``conventions``).
        target_sampler: the engine's target-only sampler, ``sampler(logits [N, V], generator,
            *, temperature, top_k, top_p) -> tokens [N]``: the target is its law, known only
            through samples, and each scenario is a two-sample test sized from
            ``detect_tv`` by the two-sample formula (about four times the samples, twice over;
            ``specdec.testing.audit.sampler``; exclusive with ``target_warp``).
        dtype: the logits' dtype; the target is the warping of the logits so rounded.
        model_interface: ``"transformers"`` hands the step ``ToyCausalLM`` models
            (``model(input_ids, past_key_values=..., use_cache=...)`` with ``.logits``, a
            ``DynamicCache`` and ``.config.vocab_size``; ``specdec.testing.hf_like``) in place
            of the logits callables.

    A scenario whose options the step rejects (it raises on the first call; an engine
    without top-p or temperature 0) is reported as not audited instead of ending the audit;
    the plain scenario (temperature 1, no filter) may not be rejected, and every scenario
    rejected raises what the last one raised.
    """
    check_audit_options(
        samples=samples,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        detect_tv=detect_tv,
        min_power_tv=min_power_tv,
        seed=seed,
        num_threads=num_threads,
    )
    if model_interface not in ("logits", "transformers"):
        raise ValueError(
            f"model_interface must be 'logits' or 'transformers', got {model_interface!r}."
        )
    on = resolve_device(device)
    battery = engine_scenarios(
        scenarios or step_scenarios(),
        step=True,
        reserved=reserved_ids,
        dtype=dtype,
        warp=target_warp,
    )
    is_batch = is_batched(fn) if batched is None else batched
    inputs = Inputs(device=on, reserved=tuple(reserved_ids), model_interface=model_interface)
    signature = BATCHED_STEP if is_batch else SINGLE_STEP
    if target_sampler is not None:
        if target_warp is not None:
            raise ValueError("give target_warp or target_sampler, not both.")
        return audit_with_sampler(
            _name(fn),
            battery,
            step_draw(fn, is_batch, inputs=inputs),
            target_sampler,
            signature=signature,
            is_batch=is_batch,
            samples=samples,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
            seed=seed,
            progress=progress,
            device=on,
            plain=_plain,
            detect_tv=detect_tv,
            min_power_tv=min_power_tv,
            allow_nondeterministic=allow_nondeterministic,
            blocks_span_steps=blocks_span_steps,
        )
    return _audit(
        "step",
        _name(fn),
        battery,
        plan_step_scenario,
        step_draw(fn, is_batch, inputs=inputs),
        complete_step,
        signature=BATCHED_STEP if is_batch else SINGLE_STEP,
        is_batch=is_batch,
        samples=samples,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        seed=seed,
        progress=progress,
        device=on,
        probe=True,
        warp=target_warp,
        detect_tv=detect_tv,
        min_power_tv=min_power_tv,
        allow_nondeterministic=allow_nondeterministic,
        blocks_span_steps=blocks_span_steps,
        num_threads=num_threads,
    )


def check_audit_options(
    *,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    num_threads: int | None = 1,
) -> None:
    """Validate the audit's options before anything runs (the command calls it too).

    Raises:
        TypeError: an option of the wrong type.
        ValueError: ``samples < 1``, a rate outside ``(0, 1)``, a distance outside ``(0, 1]``,
            both ``samples`` and ``detect_tv``, ``num_threads < 1``.

    Example:
        >>> check_audit_options(samples=0)
        Traceback (most recent call last):
        ValueError: samples must be >= 1, got 0.
    """
    if samples is not None:
        check_positive_int("samples", samples)
    check_rate("false_fail_rate", check_finite("false_fail_rate", false_fail_rate))
    check_rate("false_pass_rate", check_finite("false_pass_rate", false_pass_rate))
    for name, tv in (("detect_tv", detect_tv), ("min_power_tv", min_power_tv)):
        if tv is not None:
            check_rate(name, check_finite(name, tv), include_one=True)
    if samples is not None and detect_tv is not None:
        raise ValueError(
            f"give samples ({samples}) or detect_tv ({detect_tv}), not both: detect_tv chooses "
            "the sample size of each scenario."
        )
    check_int("seed", seed)
    if num_threads is not None:
        check_positive_int("num_threads", num_threads)


def _audit(
    level: str,
    name: str,
    scenarios: Sequence[Scenario],
    plan_scenario: PlanScenario,
    draw: Draw,
    complete: Complete,
    *,
    signature: str,
    is_batch: bool,
    samples: int | None,
    false_fail_rate: float,
    false_pass_rate: float,
    seed: int,
    progress: Progress | None,
    device: torch.device | None = None,
    probe: bool = False,
    warp: WarpFn | None = None,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
    num_threads: int | None = 1,
) -> AuditReport:
    """Plan every scenario (its sample size from ``samples`` or the distance to detect), run
    them in turn on ``num_threads`` threads, decide, and size the inconclusive ones.

    With ``probe``, a scenario with options other than the plain ones whose first call raises
    is recorded as rejected (``run.probe_options``); with ``warp``, each result carries the
    warping distance (``conventions.warping_distance``)."""
    start = time.perf_counter()
    budget = split_error_rate(false_fail_rate, false_pass_rate, num_scenarios=len(scenarios))
    target_tv = None
    if samples is not None:
        sized = [(samples, plan_scenario(scenario, samples)) for scenario in scenarios]
    else:
        target_tv = detect_tv or (DETECT_TV_BATCHED if is_batch else DETECT_TV_SINGLE)
        sized = [samples_for_tv(plan_scenario, s, target_tv, budget) for s in scenarios]
    minimum = min_power_tv if min_power_tv is not None else max(MIN_POWER_TV, target_tv or 0.0)
    results: list[ScenarioResult] = []
    with threads(num_threads):
        for index, (n, plan) in enumerate(sized):
            refused = probe_options(plan, draw, device=device) if probe else ""
            if refused and not _plain(plan.scenario):
                results.append(rejected_result(plan, refused))
                if progress is not None:
                    progress(f"[{index + 1}/{len(sized)}] {plan.scenario.name}: {refused}")
                continue
            evidence = collect_evidence(
                plan,
                draw,
                complete,
                index=index,
                seed=seed,
                chunks=chunk_sizes(n, is_batch),
                e_log_threshold=budget.e_log_threshold,
                device=device,
            )
            result = scenario_result(plan, evidence, budget)
            if warp is not None:
                tv = warping_distance(plan.scenario, warp)
                result = replace(result, warping_tv=tv, warping_differs=tv > WARPING_TOLERANCE)
            results.append(result)
            if progress is not None:
                progress(progress_line(index, len(sized), results[-1]))
        if all(r.rejected for r in results):
            raise ValueError(
                "the function rejected the options of every scenario; nothing was audited "
                f"(last: {results[-1].rejected})."
            )
        decided = [
            r
            if r.lossy or r.rejected or r.detectable_tv <= minimum
            else replace(r, samples_to_decide=samples_for_tv(plan_scenario, s, minimum, budget)[0])
            for r, s in zip(decide_by_holm(results, budget), scenarios, strict=True)
        ]
    return AuditReport(
        verdict(
            decided,
            min_power_tv=minimum,
            allow_nondeterministic=allow_nondeterministic,
            blocks_span_steps=blocks_span_steps,
        ),
        level,
        name,
        false_fail_rate,
        false_pass_rate,
        tuple(decided),
        time.perf_counter() - start,
        signature,
        detect_tv=target_tv,
        min_power_tv=minimum,
        allow_nondeterministic=allow_nondeterministic,
        blocks_span_steps=blocks_span_steps,
    )


def _ragged_plan(scenario: Scenario, samples: int) -> ScenarioPlan:
    """The verifier plan with the optimum averaged over ``k_n`` (``ragged.ragged_optimum``);
    its ``max_tokens`` stays the bound at the largest ``k`` (looser, still valid: the bound
    grows with ``k``)."""
    return replace(
        plan_verifier_scenario(scenario, samples), optimal_tokens=ragged_optimum(scenario)
    )


def _plain(scenario: Scenario) -> bool:
    """Temperature 1 and no filter: options every step must accept."""
    return scenario.temperature == 1.0 and scenario.top_k is None and scenario.top_p is None


def _name(fn: object) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}:{getattr(fn, '__qualname__', repr(fn))}"
