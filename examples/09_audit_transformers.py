"""Audit transformers' own speculative sampling with specdec (seconds on a CPU).

Same as ``specdec audit specdec.testing.transformers_adapter:transformers_speculative_sampling``.
"""

from specdec.testing.audit import audit_verifier
from specdec.testing.transformers_adapter import transformers_speculative_sampling

SAMPLES = 500  # per scenario, a quick look: INCONCLUSIVE (power far below TV 0.05); the
# command's default sizes each scenario to detect TV 0.05 (minutes for a Python loop)

report = audit_verifier(transformers_speculative_sampling, samples=SAMPLES, progress=print)
print(report.format())
