"""Every zoo entry wrapped in a whole generation loop, judged by the stream audit (exact-law
mode): each lossy entry a loop can show is LOSSY, each lossless control LOSSLESS.

The loop (``tests._stream_loops.step_loop``) calls the entry's step, or the reference drafting
and warping around the entry's verifier (``verifier_step``), until 3 new tokens are out, on a
toy pair (V = 4, 4^3 = 64 outcomes). Each entry is judged in the scenario of ``TABLE`` where
its bug shows; the distance there is the measured TV of the loop's 3-token law from the
target's (half the L1 distance between 100,000 draws and the exact law; the lossless loops
measure 0.002 to 0.005 there: the noise floor). ``forbidden`` marks a bug whose evidence is
outcomes the target forbids (a certain rejection), at the measured rate per stream.

Every audit: family-wise false-fail rate 1e-6 (a control fails with probability <= 1e-6),
sized for ``DETECT_TV`` = 0.03 with false-pass rate 1e-3; the smallest distance in the table
is 0.047, so each lossy entry is missed with probability <= 1e-3.

Not shown at this power (``NOT_SHOWN``): the small-mass guards fire only on near-equal rows,
where their stream distance is about 0.01 (``near-equal-v10-k1`` pair of the verifier
battery, n = 2: 0.017 and 0.022 measured against a noise floor of 0.011); the verifier and
step audits find them (``tests/test_zoo.py``).
"""

from fractions import Fraction

import pytest

import specdec
from specdec.models import ToyLM, ToyPair, make_toy_pair
from specdec.testing import zoo
from specdec.testing.audit import audit_stream
from tests._stream_loops import step_loop, verifier_step

PAIR = make_toy_pair(4, seed=1, closeness=Fraction(1, 2))
BLOCK_PAIR = make_toy_pair(3, seed=7, closeness=Fraction(0))  # the verifier battery's block-v3-k2
SCENARIOS: dict[str, tuple[ToyPair, specdec.SamplingOptions]] = {  # prompt [2], k = 2
    "plain": (PAIR, specdec.SamplingOptions()),
    "filtered": (PAIR, specdec.SamplingOptions(temperature=0.8, top_k=2)),
    "greedy": (PAIR, specdec.SamplingOptions(temperature=0.0)),
    "block": (BLOCK_PAIR, specdec.SamplingOptions()),
}
DETECT_TV = 0.03
CONTROL = ("filtered", 0.0)  # the controls: warping on, so a draft-side difference would show
TABLE: dict[str, tuple[str, float]] = {  # entry: scenario, measured stream TV (or forbidden rate)
    # lossless controls
    "reference_verifier": CONTROL, "reference_step": CONTROL, "block_verifier": CONTROL,
    "exact_match": CONTROL, "exact_match_step": CONTROL, "always_reject": CONTROL,
    "no_bonus": CONTROL, "residual_unnormalised_scaled": CONTROL,
    "accept_le_full_precision": CONTROL, "exponential_race_residual": CONTROL,
    "draft_other_temperature": CONTROL, "greedy_draft_onehot_q": CONTROL,
    "tiny_residual_from_target": CONTROL,
    # draft: the q handed to the verifier is not the law the drafts were sampled from
    "greedy_draft_softmax_q": ("plain", 0.555), "coarse_draft_sampling": ("plain", 0.048),
    "draft_probs_misaligned": ("plain", 0.080), "draft_topk_unscored": ("filtered", 0.207),
    "raw_logits_q": ("filtered", 0.246),
    # randomness
    "shared_uniform_reseeded": ("plain", 0.139),
    "accept_zero_prob_8bit": ("filtered", 0.0034),  # forbidden
    # acceptance
    "count_all_acceptances": ("plain", 0.373), "swapped_target_draft": ("plain", 0.663),
    "block_first_failure": ("plain", 0.216), "greedy_by_sampling_rule": ("greedy", 0.73),
    # residual
    "resample_from_target": ("plain", 0.095), "residual_by_softmax": ("plain", 0.236),
    "residual_at_drafted_token_only": ("plain", 0.063), "residual_unnormalised": ("plain", 0.226),
    "argmax_final": ("plain", 0.272), "small_mass_uniform": ("filtered", 0.0029),  # forbidden
    "block_unweighted_residual": ("block", 0.047),
    "token_acceptance_block_residual": ("block", 0.112),
    # HSD (claim 23): the published whole-draft test and two ports of the authors' code
    "hierarchical_published": ("plain", 0.052), "hierarchical_uncapped": ("plain", 0.052),
    "hierarchical_cap_at_new_max": ("block", 0.590),
    # rows and target
    "bonus_from_draft": ("plain", 0.177), "bonus_off_by_one": ("plain", 0.208),
    "target_row_shifted": ("plain", 0.774), "target_row_off_by_one": ("plain", 0.774),
    "unwarped_target": ("filtered", 0.332), "target_temperature_twice": ("filtered", 0.075),
    # lossy by design (labelled contrasts)
    "threshold_accept": ("plain", 0.128), "lenience": ("plain", 0.162),
    "typical_acceptance": ("plain", 0.166), "probability_threshold": ("plain", 0.166),
}  # fmt: skip
FORBIDDEN = {"accept_zero_prob_8bit", "small_mass_uniform"}
NOT_SHOWN = {
    "small_mass_token0": "residual mass below 0.05 only on near-equal rows: stream TV ~0.01",
    "small_mass_nan": "residual mass below 0.05 only on near-equal rows: stream TV ~0.01",
    "tiny_residual_uniform": "acts only on a residual mass below 1e-3, which these rows lack",
    "tiny_draft_accepted": "acts only on a draft probability below 1e-3, which these rows lack",
    "near_one_ratio_accepts_rest": "acts only on a ratio within 1e-3 of 1, which these rows lack",
}


def test_the_table_classifies_every_zoo_entry() -> None:
    """A new zoo entry must be put in the table (or said not to show, with the reason)."""
    assert set(TABLE) | set(NOT_SHOWN) == set(zoo.ZOO)
    assert not set(TABLE) & set(NOT_SHOWN)
    assert all(zoo.ZOO[name].lossy for name in NOT_SHOWN)
    lossy = [tv for name, (_, tv) in TABLE.items() if name not in FORBIDDEN and tv > 0]
    assert min(lossy) > DETECT_TV  # the audits are sized below every distance in the table


@pytest.mark.parametrize("name", sorted(TABLE))
def test_zoo_entry_as_an_engine_loop(name: str) -> None:
    """LOSSY for a lossy entry (false-pass <= 1e-3 at its distance >= 0.047, or a forbidden
    outcome), LOSSLESS for a control (false-fail <= 1e-6)."""
    entry = zoo.ZOO[name]
    scenario, _ = TABLE[name]
    pair, options = SCENARIOS[scenario]
    step = entry.batched if entry.level == "step" else verifier_step(entry.batched)
    sample = step_loop(pair, options, step, k=2, new_tokens=3)
    report = audit_stream(
        sample, ToyLM(pair.target), prompts=[[2]], new_tokens=3, law=options,
        detect_tv=DETECT_TV,
    )  # fmt: skip
    assert report.verdict == ("lossy" if entry.lossy else "lossless"), report.format()
    if entry.lossy and name in FORBIDDEN:
        assert report.scenarios[0].deciding_test == "forbidden outcome"  # type: ignore[union-attr]
