"""Reserved token ids (``specdec.testing.audit.scenarios.reserved``).

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

from dataclasses import replace

import pytest
import torch

from specdec.testing.audit import InvalidOutputError, audit_verifier
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.audit.scenarios.large import large_pair
from specdec.testing.audit.scenarios.reserved import without_reserved
from specdec.testing.signatures import batched
from tests._audit_engines import ANY_POWER, reference

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
    report = audit_verifier(reference, min_power_tv=ANY_POWER, samples=5_000, reserved_ids=[0, 1])
    assert report.verdict == "lossless", report.format()
    assert "reserved ids 0, 1 kept out" in report.scenarios[0].description

    @batched
    def emits_eos(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        out = reference(draft_tokens, draft_probs, target_probs, generator)
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
        audit_verifier(reference, min_power_tv=ANY_POWER, samples=500, reserved_ids=[-1])
