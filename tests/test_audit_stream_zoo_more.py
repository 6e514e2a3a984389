"""The zoo's other registries wrapped in whole generation loops, judged by the stream audit
(exact-law mode): multi-draft and tree rules (``MULTI_ZOO``), string-level steps
(``STRING_ZOO``) and batch couplings (``COUPLING_ZOO``); each lossy entry a loop can show is
LOSSY, each lossless control LOSSLESS (``test_audit_stream_zoo.py`` does the same for ``ZOO``).

The loops (``tests._stream_zoo_loops``, run by ``tests._stream_loops.step_loop``) go on until
3 new tokens are out after the prompt, on toy models with V = 4 (4^3 = 64 outcomes):

* a multi-draft rule verifies 2 candidates drawn from the warped draft row as its registered
  draw says, then a bonus token follows an accepted candidate; a tree rule verifies a tree of
  shape ``(-1, -1, 0)`` (two children of the root, one grandchild) drafted after every row;
* a string-level entry is an exact step law (a draft with its own tokenizer, claim 22), so its
  loop draws each step's block of target ids from that law at the row's context;
* a coupling entry runs in the batch an engine would form: the audited requests together
  (``shared_stream_cursor``, ``draft_scale_from_batch`` and its control), behind a greedy
  companion request (``first_row_temperature``: it verifies the batch greedily when its first
  row is greedy), or seeded behind an unseeded companion (``per_row_generators``).

Each entry is judged in the scenario of ``TABLE`` where its bug shows; the distance there is
the measured TV of the loop's 3-token law from the target's (half the L1 distance between
100,000 draws and the exact law; the lossless loops measure 0.002 to 0.008 there: the noise
floor). Four string-level mistakes also emit outcomes the target forbids (a certain rejection),
at the rate per stream noted beside them. With 2 candidates, ``draft_not_renormalised`` and
``iid_rule_on_distinct_drafts`` emit the same tokens (the unrenormalised ``q`` and the i.i.d.
rule's ``q`` agree on the second candidate): the same distance.

Every audit: family-wise false-fail rate 1e-6 (a control fails with probability <= 1e-6),
sized for ``DETECT_TV`` = 0.05 (``DETECT_TV_OF`` for two slow loops) with false-pass rate
1e-3; each lossy entry's distance is above its audit's (asserted: the smallest is 0.064), so
each lossy entry is missed with probability <= 1e-3.

Not shown (``NOT_SHOWN``): ``seeded_rows_share_stream`` draws a seeded request's uniforms from
the batch's stream when another request of the batch is unseeded: its law is right (a uniform
from another stream is still uniform; measured 0.003 in the seeded loop, the noise floor), only
its output for a given seed depends on the batch, which no test of a law sees; the invariance
audit's seed-paired comparison finds it (``tests/test_audit_invariance.py``).
"""

from fractions import Fraction
from typing import Any

import pytest

from specdec import SamplingOptions
from specdec.models import ToyLM, ToyModel, ToyPair, make_toy_pair
from specdec.string_law import make_string_pair
from specdec.testing import zoo
from specdec.testing.audit import audit_stream
from specdec.verify.tree import TokenTree
from tests._stream_loops import step_loop, verifier_step
from tests._stream_zoo_loops import mixed_batch_loop, multi_draft_step, string_loop, tree_step

NEW_TOKENS, PROMPT = 3, [2]
SCENARIOS: dict[str, tuple[ToyPair, SamplingOptions]] = {  # prompt [2]
    # soft rows (no zero, no one-hot row): every draft row can give 2 distinct candidates
    "unrelated": (
        make_toy_pair(4, seed=3, closeness=Fraction(0), zero_rate=0.0, one_hot_rate=0.0),
        SamplingOptions(),
    ),
    "soft-t07": (
        make_toy_pair(4, seed=1, closeness=Fraction(1, 2), zero_rate=0.0, one_hot_rate=0.0),
        SamplingOptions(temperature=0.7),
    ),
    "filtered": (  # test_audit_stream_zoo.py's "filtered"
        make_toy_pair(4, seed=1, closeness=Fraction(1, 2)),
        SamplingOptions(temperature=0.8, top_k=2),
    ),
}
SHAPE = (-1, -1, 0)  # the tree of every tree rule: two children of the root, one grandchild
CANDIDATES = 2  # of every multi-draft rule (SpecHub and the select-then-reject rule take 2)
STRING_PAIR = make_string_pair(2302, ("a", "b", "ab", "ba"), ("a", "b", "ab", "bb", "bab"))
STRING_PROMPT = [0]  # "a"
DETECT_TV = 0.05
DETECT_TV_OF = {  # entries whose loops are slow (a Python loop over the rows in the entry)
    "shared_stream_cursor": 0.15,  # lossy at 0.196: sized for 0.15, the e-process decides
    "per_row_generators": 0.1,  # a control: its false-fail rate is 1e-6 at any size
}
TABLE: dict[str, tuple[str, float]] = {  # entry: scenario, measured stream TV (0: a control)
    # multi-draft (one position, 2 candidates, then a bonus after an acceptance): controls
    "multi_iid": ("unrelated", 0.0), "multi_without_replacement": ("unrelated", 0.0),
    "multi_point_mass": ("unrelated", 0.0), "multi_kseq": ("unrelated", 0.0),
    "multi_optimal": ("unrelated", 0.0), "multi_spechub": ("unrelated", 0.0),
    "multi_optimal_select": ("unrelated", 0.0),
    # multi-draft bugs
    "iid_rule_on_distinct_drafts": ("unrelated", 0.077),
    "residual_not_updated": ("unrelated", 0.140),
    "draft_not_renormalised": ("unrelated", 0.077),
    "point_mass_scored_with_q": ("unrelated", 0.428),
    "optimal_resampled_from_target": ("unrelated", 0.168),
    "optimal_flow_of_iid_draw": ("unrelated", 0.255),
    "spechub_hub_not_capped": ("unrelated", 0.557),
    "spechub_residual_of_single_draft": ("unrelated", 0.103),
    "optimal_select_tested_against_q": ("unrelated", 0.105),
    # trees (shape (-1, -1, 0)): controls, then bugs
    "tree_iid": ("soft-t07", 0.0), "tree_without_replacement": ("soft-t07", 0.0),
    "tree_point_mass": ("soft-t07", 0.0), "traversal_verifier": ("soft-t07", 0.0),
    "tree_point_mass_scored_with_q": ("unrelated", 0.494),
    "tree_iid_rule_on_distinct_siblings": ("unrelated", 0.073),
    "tree_bonus_wrong_temperature": ("soft-t07", 0.074),
    "traversal_stale_weight": ("unrelated", 0.130),
    "traversal_remaining_mass_weight": ("soft-t07", 0.096),
    # string-level steps (claim 22), a draft with another tokenizer: controls, then mistakes
    "slem": ("strings", 0.0), "slem_drop_partial_last": ("strings", 0.0),
    "slem_char_level": ("strings", 0.0), "slrs": ("strings", 0.0),
    "slem_context_retokenized": ("strings", 0.791),  # forbidden outcomes 0.64 per stream
    "slem_string_prefix_accept": ("strings", 0.261),  # forbidden 0.10
    "slem_greedy": ("strings", 0.149),
    "slrs_one_tokenization": ("strings", 0.634),  # forbidden 0.54
    "slrs_prefix_probability": ("strings", 0.351),
    "slrs_exact_string": ("strings", 0.634),  # forbidden 0.52
    "slrs_short_lookahead": ("strings", 0.168),
    # batch couplings: controls, then bugs
    "per_row_scale_step": ("filtered", 0.0), "per_row_generators": ("filtered", 0.0),
    "shared_stream_cursor": ("unrelated", 0.196), "first_row_temperature": ("filtered", 0.632),
    "draft_scale_from_batch": ("filtered", 0.064),
}  # fmt: skip
NOT_SHOWN = {
    "seeded_rows_share_stream": "its law is right, only its output for a seed moves: TV 0.003",
}
REGISTRIES = (zoo.MULTI_ZOO, zoo.STRING_ZOO, zoo.COUPLING_ZOO)


def test_the_table_classifies_every_entry() -> None:
    """A new entry of these registries must be put in the table (or said not to show)."""
    every = {name for registry in REGISTRIES for name in registry}
    assert set(TABLE) | set(NOT_SHOWN) == every
    assert not set(TABLE) & set(NOT_SHOWN)
    assert all(_lossy(name) == (tv > 0) for name, (_, tv) in TABLE.items())
    for name, (_, tv) in TABLE.items():  # each audit is sized below its entry's distance
        assert tv == 0 or tv > DETECT_TV_OF.get(name, DETECT_TV), name


def _lossy(name: str) -> bool:
    if name in zoo.COUPLING_ZOO:
        return zoo.COUPLING_ZOO[name].verdict != "lossless"
    registry = zoo.MULTI_ZOO if name in zoo.MULTI_ZOO else zoo.STRING_ZOO
    return registry[name].lossy


def engine_loop(name: str, scenario: str) -> tuple[Any, ToyModel, list[int], SamplingOptions]:
    """The entry ``name`` in a generation loop: ``(sample, target, prompt, options)``."""
    if name in zoo.STRING_ZOO:
        sample = string_loop(zoo.STRING_ZOO[name].law, STRING_PAIR, k=2, new_tokens=NEW_TOKENS)
        return sample, STRING_PAIR.target, STRING_PROMPT, SamplingOptions()
    pair, options = SCENARIOS[scenario]
    if name in zoo.MULTI_ZOO:
        entry = zoo.MULTI_ZOO[name]
        if entry.kind == "position":
            step, k = multi_draft_step(entry.rule, entry.draw, CANDIDATES), 1
        else:
            tree = TokenTree(parents=SHAPE, draw=entry.draw)  # type: ignore[arg-type]
            step, k = tree_step(entry.rule, tree), tree.depth
        return (
            step_loop(pair, options, step, k=k, new_tokens=NEW_TOKENS),
            pair.target,
            PROMPT,
            options,
        )
    coupling = zoo.COUPLING_ZOO[name]
    if name == "first_row_temperature":  # behind a greedy request
        greedy = SamplingOptions(temperature=0.0)
        sample = mixed_batch_loop(
            pair, options, coupling.fn, k=2, new_tokens=NEW_TOKENS, companion_prompt=(1,),
            companion=greedy,
        )  # fmt: skip
    elif name in ("per_row_generators", "seeded_rows_share_stream"):  # seeded, behind unseeded
        sample = mixed_batch_loop(
            pair, options, coupling.fn, k=2, new_tokens=NEW_TOKENS, companion_prompt=(1,),
            companion=options, seeded=True,
        )  # fmt: skip
    else:  # the audited requests together
        step = coupling.fn if coupling.level == "step" else verifier_step(coupling.fn)
        sample = step_loop(pair, options, step, k=2, new_tokens=NEW_TOKENS)
    return sample, pair.target, PROMPT, options


@pytest.mark.parametrize("name", sorted(TABLE))
def test_zoo_entry_as_an_engine_loop(name: str) -> None:
    """LOSSY for a lossy entry (false-pass <= 1e-3 at its distance > DETECT_TV, or a forbidden
    outcome), LOSSLESS for a control (false-fail <= 1e-6)."""
    sample, target, prompt, options = engine_loop(name, TABLE[name][0])
    report = audit_stream(
        sample, ToyLM(target), prompts=[prompt], new_tokens=NEW_TOKENS, law=options,
        detect_tv=DETECT_TV_OF.get(name, DETECT_TV),
    )  # fmt: skip
    assert report.verdict == ("lossy" if _lossy(name) else "lossless"), report.format()
