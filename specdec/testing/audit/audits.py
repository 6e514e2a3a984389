r"""The thin forms of ``audit``: one public function per level, taking the options as keywords.

``audit_verifier``, ``audit_step``, ``audit_multi_draft``, ``audit_tree`` and ``audit_stream``
each build a ``Subject`` (``as_subject``) and an ``AuditOptions`` from their keywords
(``AuditKeywords``) and call the one door, ``audit`` (``door``: its plan, ``audit_plan``,
run): ``audit_verifier(fn, detect_tv=0.05)`` is
``audit(as_subject(fn, level="verifier"), AuditOptions(detect_tv=0.05))``. Each returns one
``AuditReport``. ``audit`` itself is importable from here too.
"""

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar, Unpack

from torch import Tensor

from specdec.multi_law import Draw
from specdec.testing.audit.contract.options import (
    STREAM_KEYWORDS,
    AuditKeywords,
    AuditOptions,
    Progress,
    StreamKeywords,
)
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.stream_options import StreamOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.door import audit
from specdec.testing.audit.judging.stream import stream_scenarios
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.signatures import StepFn, VerifierFn
from specdec.types import VerifyRule
from specdec.warp import SamplingOptions

__all__ = [
    "audit",
    "audit_multi_draft",
    "audit_step",
    "audit_stream",
    "audit_tree",
    "audit_verifier",
]

F = TypeVar("F", bound=Callable[..., Any])


def _with_options(entry: F, stream: bool = False) -> F:
    """``entry`` with the options listed as keyword-only parameters in its signature
    (``inspect.signature``, ``help()``): its ``**options`` are ``AuditOptions``'s fields (and
    with ``stream``, first, ``StreamOptions``'s, ``STREAM_KEYWORDS``)."""
    signature = inspect.signature(entry)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    names = {p.name for p in kept}
    defaults: dict[str, Any] = {
        **{name: getattr(StreamOptions(), name) for name in STREAM_KEYWORDS if stream},
        **{name: getattr(AuditOptions(), name) for name in AuditKeywords.__annotations__},
    }
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in defaults.items()
        if name not in names
    ]
    entry.__signature__ = signature.replace(parameters=[*kept, *extra])  # type: ignore[attr-defined]
    return entry


def _with_stream_options(entry: F) -> F:
    """``_with_options`` for ``audit_stream``: a stream's own keywords listed too."""
    return _with_options(entry, stream=True)


@_with_options
def audit_verifier(
    fn: VerifierFn | VerifyRule,
    *,
    batched: bool | None = None,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    **options: Unpack[AuditKeywords],
) -> AuditReport:
    """Audit a verifier: does its emitted block complete to the target's law?

    The criterion: the emitted block, completed to ``k+1`` tokens by sampling the target, must
    have exactly the target's joint law of ``k+1`` tokens (``proofs/theory.md`` claim 2). Each
    scenario tests it with an e-process, the L1 test and the G test; the error-rate split is
    documented in ``specdec.testing.audit.running.plan``. With ``exact=True`` the law is computed
    from the rule's own decisions instead (``specdec.testing.audit.judging.exact``: no sampling, no
    error rates; ``cannot decide`` where its randomness cannot be enumerated).

    Args:
        fn: ``fn(draft_tokens [k], draft_probs [k, V], target_probs [k+1, V], generator)
            -> LongTensor[n]``, or the batched form (leading ``N``, result ``[N, k+1]``
            ``-1``-padded) marked with ``@specdec.testing.signatures.batched``, or a
            ``VerifyRule`` (``uniforms`` as its fourth parameter, a ``Verification`` out):
            detected from its parameters, run batched on uniforms the audit draws. The
            report's ``signature`` says which form ran.
        batched: override the ``@batched`` marker (ignored for a ``VerifyRule``).
        scenarios: the battery (default ``verifier_scenarios()``; exact: the verifier battery
            and ``search`` searched pairs).
        progress: called with one line per finished scenario.
        **options: the options (``AuditOptions``: ``exact``, ``samples`` or ``detect_tv``
            (default 0.01 for a batched function or rule, 0.05 for a single-sequence one),
            ``min_power_tv``, ``false_fail_rate``, ``false_pass_rate``, ``seed``,
            ``num_threads``, ``allow_nondeterministic``, ``blocks_span_steps``, ``search``,
            ``reserved_ids``, ``dtype``, ``device``, ``ragged``, ``invariance``: also run each
            scenario's rows alone and in mixed batches, ``batch-dependent`` when a row's law
            changes with its batch; batched forms and rules only).

    Returns:
        An ``AuditReport``. Exceptions raised by ``fn`` propagate; an output that is not an
        emitted block raises ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an invalid option, or one that does not apply to ``fn``'s form,
            before ``fn`` is ever called; an absent device, an unsupported dtype, reserved ids
            leaving fewer than 2 tokens.

    Example:
        >>> import specdec
        >>> from specdec.testing.audit import search_scenarios
        >>> pairs = search_scenarios(2)
        >>> report = audit_verifier(specdec.verify_tokens, exact=True, scenarios=pairs)
        >>> report.verdict, report.mode, report.exit_code
        ('lossless', 'exact', 0)
    """
    subject = as_subject(fn, level="verifier", batched=batched)
    return audit(subject, AuditOptions.of(**options), scenarios=scenarios, progress=progress)


@_with_options
def audit_step(
    fn: StepFn,
    *,
    batched: bool | None = None,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
    **options: Unpack[AuditKeywords],
) -> AuditReport:
    """Audit a whole step (drafting, warping, verification) against the *warped* target.

    ``fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p)``
    returns the emitted block; the logits callables are toy models behind a plain function
    (``log`` of exact rational rows, ``-inf`` for zero probabilities). The audit picks the
    sampling options per scenario; the target law is that of
    ``warp_probs(target_logits(context), temperature, top_k, top_p)`` at every context, and
    the optimum assumes the draft uses the same options. Arguments as in ``audit_verifier``
    (default battery ``step_scenarios()``; statistical only), and the options:

    * ``target_warp``: the engine's warping, ``warp(logits [N, V], *, temperature, top_k,
      top_p) -> probs [N, V]``: the target is then its warped law, so the verdict is about
      verification given the engine's warping, and each scenario reports the TV between that
      law and ``warp_probs``'s (``warping_tv``; ``conventions``).
    * ``target_sampler``: the engine's target-only sampler, ``sampler(logits [N, V],
      generator, *, temperature, top_k, top_p) -> tokens [N]``: the target is its law, known
      only through samples, and each scenario is a two-sample test sized from ``detect_tv``
      (``specdec.testing.audit.judging.sampler``; exclusive with ``target_warp``).
    * ``dtype``: the logits' dtype; the target is the warping of the logits so rounded.
    * ``model_interface``: ``"transformers"`` hands the step ``ToyCausalLM`` models
      (``specdec.testing.hf_like``) in place of the logits callables.

    A scenario whose options the step rejects (it raises on the first call; an engine
    without top-p or temperature 0) is reported as not audited instead of ending the audit;
    the plain scenario (temperature 1, no filter) may not be rejected, and every scenario
    rejected raises what the last one raised.
    """
    subject = as_subject(fn, level="step", batched=batched)
    return audit(subject, AuditOptions.of(**options), scenarios=scenarios, progress=progress)


@_with_options
def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
    *,
    progress: Progress | None = None,
    **options: Unpack[AuditKeywords],
) -> AuditReport:
    r"""Audit a multi-draft rule on candidates drawn as ``draw`` says: does it emit ``p``?

    The criterion: at one position, ``k`` candidates drawn from ``q`` as ``draw`` says, the
    emitted token's law must be the target's,

    .. math:: \Pr(\text{token} = x) = p(x) \quad \text{for every } x,

    (``proofs/theory.md``, claim 16; SpecInfer, Miao et al. 2024, sec. 4; SpecTr, Sun et al.
    2023, sec. 3), checked by sampling (the default) or exactly (``exact=True``;
    ``specdec.testing.audit.judging.multi``).

    Args:
        rule: ``rule(draft_tokens [N, k], draft_probs [N, V], target_probs [N, V], uniforms
            [N, k+1]) -> result`` with ``result.token [N]`` (``MultiDraftRule``).
        draw: ``"iid"``, ``"without_replacement"`` or ``"point_mass"`` (the draft's top-``k``).
        scenarios: the battery (default ``position_scenarios()``).
        progress: called with one line per finished scenario.
        **options: ``exact``, and (statistical) ``samples`` or ``detect_tv`` (default 0.01),
            ``min_power_tv``, ``false_fail_rate`` (family-wise, Holm), ``false_pass_rate``,
            ``allow_nondeterministic`` (judge the law of a rule whose outputs change on the
            same inputs); ``seed`` (the exploration seed, exact, or of everything drawn),
            ``num_threads``.

    Returns:
        An ``AuditReport`` (``mode`` ``"exact"`` or ``"statistical"``). Exceptions raised by
        ``rule`` propagate; (statistical) an output that is not ``[N]`` token ids raises
        ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an unknown draw, an empty battery, sampling options with
            ``exact=True``, an invalid option, before ``rule`` is called.

    Example:
        >>> from specdec.testing.zoo import MULTI_ZOO
        >>> bug = MULTI_ZOO["draft_not_renormalised"]
        >>> audit_multi_draft(bug.rule, bug.draw, exact=True).verdict
        'lossy'
        >>> audit_multi_draft(bug.rule, bug.draw, detect_tv=0.03).verdict
        'lossy'
    """
    subject = as_subject(rule, level="position", draw=draw)
    return audit(subject, AuditOptions.of(**options), scenarios=scenarios, progress=progress)


@_with_options
def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
    *,
    progress: Progress | None = None,
    **options: Unpack[AuditKeywords],
) -> AuditReport:
    r"""Audit a tree rule (``verify_tree``'s arguments) on trees drawn as ``draw`` says.

    The criterion: the emitted block, completed to ``depth + 1`` tokens by sampling the target,
    must have the target's joint law,

    .. math:: \Pr(x_{1:d+1}) = \prod_{i=1}^{d+1} p(x_i \mid \text{prefix}, x_{<i}),

    (``proofs/theory.md``, claim 17; SpecInfer, Miao et al. 2024, sec. 4), checked by sampling
    or exactly. Arguments as in ``audit_multi_draft``, except:

    Args:
        rule: ``rule(tree, draft_tokens [N, nodes], draft_probs [N, nodes+1, V], target_probs
            [N, nodes+1, V], uniforms [N, nodes+1]) -> result`` with ``result.tokens
            [N, depth+1]`` (``-1``-padded; ``specdec.verify.verify_tree``).
        draw: the draw of every node's children.
        scenarios: the battery (default ``tree_scenarios()``).
        progress: called with one line per finished scenario.
        **options: as ``audit_multi_draft``'s.

    Example:
        >>> from specdec.verify import verify_tree
        >>> from specdec.testing.audit import tree_scenarios
        >>> report = audit_tree(verify_tree, "point_mass", tree_scenarios()[:1], exact=True)
        >>> print(report.headline().replace("; ", ";\n"))
        LOSSLESS (exact on 1 tree scenario(s), candidates drawn point_mass);
        reached 15 of 23 branch arcs of the function's own code
    """
    subject = as_subject(rule, level="tree", draw=draw)
    return audit(subject, AuditOptions.of(**options), scenarios=scenarios, progress=progress)


@_with_stream_options
def audit_stream(
    sample: Callable[..., Any],
    target: object,
    *,
    prompts: Sequence[Sequence[int] | Tensor],
    new_tokens: int,
    law: SamplingOptions | None = None,
    batched: bool | None = None,
    progress: Progress | None = None,
    **audit_options: Unpack[StreamKeywords],
) -> AuditReport:
    r"""Audit an engine's whole generation: do its new tokens have the target's law?

    The criterion: after each prompt, the engine's first ``n = new_tokens`` tokens must have
    the target's warped law (speculation changes speed, never the law; ``proofs/theory.md``
    claim 2, by induction over steps),

    .. math:: \Pr(x_{1:n}) = \prod_{i=1}^{n} \pi(x_i \mid \text{prompt}, x_{<i}),

    ``pi`` the target's rows warped by ``law``. Exact-law mode: ``V ** new_tokens`` at
    most ``stream.EXACT_LAW_SEQUENCES``, the law enumerated from the target by teacher
    forcing, the engine's streams sampled and judged per prompt (``specdec.testing.audit.
    stream``: pooled cells, L1 and G tests with Holm across prompts, the e-process, forbidden
    outcomes as certain rejections, the power in TV). Large-vocabulary mode (``V ** n``
    above that, or ``mode="large"``): each token's randomized PIT (three orders) and
    standardized surprisal against its teacher-forced row, four anytime-valid e-processes
    (Bonferroni; eight with ``position_kinds``) and forbidden tokens as certain rejections,
    the power as a binned-PIT TV and a mean-surprisal shift (``specdec.testing.audit
    .stream_large``, which also states what it cannot see). Two-sample mode
    (``mode="two-sample"``, ``reference`` the engine without speculation): both streams
    through the target's PIT, compared.

    It is ``audit(as_subject(sample, level="stream", batched=batched),
    AuditOptions(..., stream=StreamOptions(mode, reference, position_kinds, eos_token_id)),
    scenarios=stream_scenarios(prompts, new_tokens, target, law, eos_token_id))``: the one
    door every audit takes.

    Args:
        sample: ``sample(prompt [L], generator) -> LongTensor [>= n]`` new tokens (prompt
            excluded), or with ``@batched`` (or ``batched=True``) ``sample(prompts [N, L],
            generator) -> [N, >= n]``; only the first ``n`` are judged.
        target: the target, a specdec ``CausalLM`` (``specdec.models.ToyLM``, ``HFModel``)
            or a transformers causal LM (wrapped in ``HFModel``).
        prompts: the prompts (token id lists or 1-D tensors), one scenario each.
        new_tokens: ``n``, the new tokens judged after each prompt.
        law: the law the engine claims, a ``SamplingOptions`` (default: temperature 1, no
            filter). Its old name ``options=`` still works for one release, with a
            ``DeprecationWarning``.
        batched: override the ``@batched`` marker (of ``sample`` and of ``reference``).
        progress: called with one line per finished prompt (per chunk, large and two-sample).
        **audit_options: a stream's own choices (``StreamOptions``, given one by one or as
            ``stream=``): ``mode`` (``"auto"``: exact-law when ``V ** n <= 65536``, else
            large; ``"exact"``, ``"large"`` or ``"two-sample"``); ``reference`` (two-sample:
            the engine without speculation, in ``sample``'s form); ``position_kinds`` (large,
            two-sample: ``(prompts [N, L], tokens [N, n]) -> [N, n]`` labels 0 accepted
            draft, 1 corrected, 2 bonus, called after each ``sample`` call: the report gains
            a row per kind, and in large mode the bonus positions are judged alone too, four
            more e-processes, Bonferroni over eight); ``eos_token_id`` (exact-law mode:
            judge "the first ``n`` tokens or until this EOS", EOS absorbing: the engine may
            stop there and return fewer tokens or ``-1`` padding; a token after it is a
            forbidden outcome; ``None``: every generation must give ``n`` tokens). And the
            options (``AuditOptions``): ``samples`` or ``detect_tv`` (default 0.01 batched,
            0.05 single), ``min_power_tv``, ``false_fail_rate`` (family-wise, over the
            prompts), ``false_pass_rate``, ``seed``, ``num_threads``,
            ``allow_nondeterministic``.

    Returns:
        An ``AuditReport`` (``level`` ``"stream"``), one row per prompt. Exceptions raised by
        ``sample`` propagate; an output that is not ``n`` token ids raises
        ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an option that does not apply to a stream, stream options
            that exclude each other (``StreamOptions``), an invalid prompt, ``V **
            new_tokens`` too large for exact-law mode (it says so; no verdict), both ``law``
            and ``options``, before ``sample`` is ever called.

    Example:
        >>> import torch, specdec
        >>> from specdec.models import ToyLM, make_toy_pair
        >>> from specdec.testing.signatures import batched
        >>> pair = make_toy_pair(4, seed=0)
        >>> target, draft = ToyLM(pair.target), ToyLM(pair.draft)
        >>> @batched
        ... def sample(prompts, generator):
        ...     return specdec.generate_speculative(
        ...         target, draft, prompts, k=2, max_new_tokens=2, generator=generator
        ...     ).tokens
        >>> report = audit_stream(sample, target, prompts=[[1]], new_tokens=2, detect_tv=0.05)
        >>> report.verdict, report.level, report.scenarios[0].name
        ('lossless', 'stream', 'prompt-0')
    """
    keywords: dict[str, Any] = dict(audit_options)
    if "options" in keywords:  # the law's name before ``law``
        warnings.warn(
            "audit_stream(options=...) is deprecated: the law the engine claims is law= (a "
            "SamplingOptions); options= goes in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        if law is not None:
            raise TypeError("give law= (options= is its deprecated name), not both.")
        law = keywords.pop("options")
    chosen = {name: keywords.pop(name) for name in STREAM_KEYWORDS if name in keywords}
    reference = chosen.get("reference")
    if reference is not None:  # in sample's form: the same batched override
        chosen["reference"] = as_subject(reference, level="stream", batched=batched)
    stream = replace(keywords.pop("stream", StreamOptions()), **chosen)
    subject = as_subject(sample, level="stream", batched=batched)
    options = AuditOptions.of(**keywords, stream=stream)
    subject.check(options)  # before the prompts are checked, as every option error
    scenarios = stream_scenarios(
        prompts, new_tokens, target, law, stream.eos_token_id, exact_law=stream.mode == "exact"
    )
    return audit(subject, options, scenarios=scenarios, progress=progress)
