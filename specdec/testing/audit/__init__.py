"""The audit: is *your* speculative decoder lossless?

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

Modules: ``battery`` (the scenarios), ``plan`` (sample sizes, cells, the error-rate split),
``run`` (calling the function and completing its blocks), ``report`` (results, verdict, printed
report, exit codes), ``audits`` (the two entry points), ``exact`` (the exact audit of a rule
that takes its uniforms: laws from its own decisions, no sampling; ``audit_verifier(...,
exact=True)``), ``multi`` (the audit of multi-draft and tree rules, with their own
signatures and battery, ``multi_battery``: ``audit_multi_draft``, ``audit_tree``; exact by
default, statistical with ``exact=False``, ``multi_sampled``).

For real engines: ``conventions`` (the engine's warping against specdec's, dtypes, devices),
``sampler`` (a step against the engine's own target-only sampler: a two-sample test),
``reserved`` (token ids kept out of the toy vocabularies), ``large`` (vocabularies in the
thousands, rows exact in every dtype), ``ragged`` (per-row ``k`` in the batched verifier
signature); the battery's catalogue is chosen from by name (``select_scenarios``), and
``specdec.testing.hf_like`` wraps a toy model as a transformers-like causal LM.
"""

from specdec.testing.audit.audits import (
    Progress,
    audit_step,
    audit_verifier,
    check_audit_options,
)
from specdec.testing.audit.battery import (
    Scenario,
    scenario_catalogue,
    select_scenarios,
    step_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.exact import (
    ExactAuditReport,
    ExactScenarioResult,
    audit_exact,
    search_scenarios,
)
from specdec.testing.audit.multi import MultiAuditReport, audit_multi_draft, audit_tree
from specdec.testing.audit.multi_sampled import MultiSampledReport
from specdec.testing.audit.report import VERDICT_EXIT, AuditReport, ExitCode, ScenarioResult
from specdec.testing.audit.run import InvalidOutputError

__all__ = [
    "VERDICT_EXIT",
    "AuditReport",
    "ExactAuditReport",
    "ExactScenarioResult",
    "ExitCode",
    "InvalidOutputError",
    "MultiAuditReport",
    "MultiSampledReport",
    "Progress",
    "Scenario",
    "ScenarioResult",
    "audit_exact",
    "audit_multi_draft",
    "audit_step",
    "audit_tree",
    "audit_verifier",
    "check_audit_options",
    "scenario_catalogue",
    "search_scenarios",
    "select_scenarios",
    "step_scenarios",
    "verifier_scenarios",
]
