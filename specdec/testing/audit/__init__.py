"""The audit: is *your* speculative decoder lossless?

How it is built, in one picture: ``docs/architecture.md`` (one door, ``audit``; one
``Drawer`` protocol and seed rule; one scheduler; one report).

The folder shows the frame: the door, the plan and the command here, and below them
``contract`` (subject, options, scenarios' records), ``scenarios`` (batteries, catalogue,
search, coverage), ``running`` (drawers, the scheduler, checkpoints), ``reporting`` (results,
decision, report) and ``judging`` (sampled, exact, stream), each importing only downward.

``audit_verifier`` and ``audit_step`` run a fixed battery of toy scenarios (``battery``). For
each they draw draft blocks, run the audited function, complete each emitted block to ``k+1``
tokens by sampling the target, and compare the completions with the target's exact joint law of
``k+1`` tokens, which a lossless function reproduces exactly (``proofs/theory.md`` claim 2). Per
scenario the report gives:

* **the completion-law test**: the finite-sample L1 test on cells pooled by expected mass
  (expected count >= 5, decided before sampling), with a conservative p-value, and the G test
  on the same cells as a complement (more power when there are many cells); Holm's procedure
  over both tests of every scenario;
* **an anytime-valid e-process** (Krichevsky–Trofimov mixture) watched after every chunk, so a
  gross bug stops the scenario early; an outcome the target forbids is a certain rejection;
* **the efficiency**: mean emitted tokens against the token-level optimum
  ``sum_i P(tau >= i)``; a lossless but wasteful function is *lossless, suboptimal*, not lossy;
* **determinism** (same generator seed, same output) and **validity** (lengths ``1..k+1``,
  ``-1`` padding, ids in range).

The family-wise false-fail rate over all scenarios is at most ``false_fail_rate``; how it is
divided between the e-processes and the tests is documented in ``plan``. Each scenario draws the
sample its stated power needs (``detect_tv``: 0.01 batched, 0.05 single-sequence by default),
and a verdict states that power: LOSSLESS means "no deviation of TV >= x found", INCONCLUSIVE
that the power fell below a minimum; every verdict class has its exit code (``report``).

One design under every form and mode. What is audited becomes one ``Subject`` at the boundary
(``subject.as_subject``: a rule, a verifier or a step, batched or not, a multi-draft or tree
rule); what the caller chooses is one frozen ``AuditOptions`` (``options``), validated when
built; ``audit(subject, options)`` (``door``) plans the audit once (``audit_plan.plan_audit``:
the scenarios from the ``catalogue``, the search, the invariance checks, the pilot) and runs
the plan with one drawing engine, and every engine returns one ``AuditReport`` (``report``,
written as text by ``report_text``; per-scenario results and the decision in ``results``) with
one exit-code table (``ExitCode``). The engines: ``sampled`` (the statistical audit of
verifiers and steps: ``plan`` fixes sample sizes, cells and the error-rate split, ``run`` calls
the function and completes its blocks, ``shard`` draws the chunks in this process, on local
workers or on any executor with the same report, ``checkpoint`` saves and resumes them),
``sampler`` (a step against the engine's own target-only sampler: a two-sample test), ``exact``
(a rule's law from its own decisions, no sampling), ``multi`` and ``multi_sampled`` (multi-draft
and tree rules, exactly or by sampling), ``stream`` (an engine's whole generation against the
target's law enumerated by teacher forcing: exact-law mode), ``stream_large`` (the same for a large
vocabulary: each token's PITs and surprisal against its row, anytime-valid; and two engines
compared; both drawn round-robin on the scheduler by ``stream_rounds``); a stream's mode is
resolved once when planned (``stream_modes``), its sampler's output checked with each misuse
named (``stream_outputs``), its sizes and a pilot's estimate said first (``stream_pilot``).
``audit_verifier``,
``audit_step``, ``audit_multi_draft``, ``audit_tree`` and ``audit_stream`` are ``audit`` for
one level; ``command`` is ``specdec audit``.

For real engines: ``conventions`` (the engine's warping against specdec's, dtypes, devices),
``reserved`` (token ids kept out of the toy vocabularies), ``large`` (vocabularies in the
thousands, rows exact in every dtype), ``ragged`` (per-row ``k`` in the batched verifier
signature), ``invariance`` (``invariance=True``: a row's law alone against its law in mixed
batches, ``batch-dependent`` when they differ); ``specdec.testing.hf_like`` wraps a toy model
as a transformers-like causal LM.
"""

from typing import TYPE_CHECKING

from specdec._lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers and readers
    from specdec.testing.audit.audit_plan import AuditPlan, plan_audit
    from specdec.testing.audit.audits import (
        audit_multi_draft,
        audit_step,
        audit_stream,
        audit_tree,
        audit_verifier,
    )
    from specdec.testing.audit.contract.options import (
        AuditOptions,
        Progress,
        check_audit_options,
    )
    from specdec.testing.audit.contract.scenario import Scenario
    from specdec.testing.audit.contract.stream_options import StreamOptions
    from specdec.testing.audit.contract.subject import (
        Subject,
        as_subject,
    )
    from specdec.testing.audit.door import audit
    from specdec.testing.audit.judging.exact import (
        audit_exact,
    )
    from specdec.testing.audit.judging.invariance import check_invariance
    from specdec.testing.audit.reporting.invariance_results import InvarianceResult
    from specdec.testing.audit.reporting.report import (
        VERDICT_EXIT,
        AuditReport,
        ExitCode,
    )
    from specdec.testing.audit.reporting.results import (
        ExactScenarioResult,
        ScenarioResult,
    )
    from specdec.testing.audit.running.run import (
        InvalidOutputError,
    )
    from specdec.testing.audit.scenarios.battery import step_scenarios, verifier_scenarios
    from specdec.testing.audit.scenarios.catalogue import (
        scenario_catalogue,
        search_scenarios,
        select_scenarios,
    )
    from specdec.testing.audit.scenarios.multi_battery import (
        PositionScenario,
        TreeScenario,
        position_scenarios,
        tree_scenarios,
    )

__all__ = [
    "VERDICT_EXIT",
    "AuditOptions",
    "AuditPlan",
    "AuditReport",
    "ExactScenarioResult",
    "ExitCode",
    "InvalidOutputError",
    "InvarianceResult",
    "PositionScenario",
    "Progress",
    "Scenario",
    "ScenarioResult",
    "StreamOptions",
    "Subject",
    "TreeScenario",
    "as_subject",
    "audit",
    "audit_exact",
    "audit_multi_draft",
    "audit_step",
    "audit_stream",
    "audit_tree",
    "audit_verifier",
    "check_audit_options",
    "check_invariance",
    "plan_audit",
    "position_scenarios",
    "scenario_catalogue",
    "search_scenarios",
    "select_scenarios",
    "step_scenarios",
    "tree_scenarios",
    "verifier_scenarios",
]

_HOMES = {
    "audit": "specdec.testing.audit.door",
    "AuditPlan": "specdec.testing.audit.audit_plan",
    "plan_audit": "specdec.testing.audit.audit_plan",
    "audit_multi_draft": "specdec.testing.audit.audits",
    "audit_step": "specdec.testing.audit.audits",
    "audit_stream": "specdec.testing.audit.audits",
    "audit_tree": "specdec.testing.audit.audits",
    "audit_verifier": "specdec.testing.audit.audits",
    "Scenario": "specdec.testing.audit.contract.scenario",
    "step_scenarios": "specdec.testing.audit.scenarios.battery",
    "verifier_scenarios": "specdec.testing.audit.scenarios.battery",
    "scenario_catalogue": "specdec.testing.audit.scenarios.catalogue",
    "search_scenarios": "specdec.testing.audit.scenarios.catalogue",
    "select_scenarios": "specdec.testing.audit.scenarios.catalogue",
    "audit_exact": "specdec.testing.audit.judging.exact",
    "PositionScenario": "specdec.testing.audit.scenarios.multi_battery",
    "TreeScenario": "specdec.testing.audit.scenarios.multi_battery",
    "position_scenarios": "specdec.testing.audit.scenarios.multi_battery",
    "tree_scenarios": "specdec.testing.audit.scenarios.multi_battery",
    "AuditOptions": "specdec.testing.audit.contract.options",
    "Progress": "specdec.testing.audit.contract.options",
    "check_audit_options": "specdec.testing.audit.contract.options",
    "VERDICT_EXIT": "specdec.testing.audit.reporting.report",
    "AuditReport": "specdec.testing.audit.reporting.report",
    "ExitCode": "specdec.testing.audit.reporting.report",
    "ExactScenarioResult": "specdec.testing.audit.reporting.results",
    "ScenarioResult": "specdec.testing.audit.reporting.results",
    "InvalidOutputError": "specdec.testing.audit.running.run",
    "StreamOptions": "specdec.testing.audit.contract.stream_options",
    "Subject": "specdec.testing.audit.contract.subject",
    "as_subject": "specdec.testing.audit.contract.subject",
    "InvarianceResult": "specdec.testing.audit.reporting.invariance_results",
    "check_invariance": "specdec.testing.audit.judging.invariance",
}
"""Where each exported name lives: imported on first use, so that importing one module of
the package (``specdec audit --help`` imports the command's parser) loads no other."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
