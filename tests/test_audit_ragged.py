"""Ragged per-row ``k`` in the batched verifier signature
(``specdec.testing.audit.scenarios.ragged``).

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import pytest
import torch

import specdec
from specdec.testing.audit import InvalidOutputError, audit_verifier
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.signatures import batched
from tests._audit_engines import ANY_POWER, SMALL

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
