"""Mutants of the *encodings*: each rule or quantity ``_machine.py`` writes down, changed in its
source text (a threshold or weight scaled by 0.999 or 1.001, a ``min`` dropped, an index moved
by one, a base moved), must make some obligation of every proof that uses it refuted by z3.

``test_machine.py`` shows the machinery can fail and each proof's control (``refute_control``)
moves one threshold through a flag; this file edits the text itself, so a quantity written down
twice, one copy untied to the obligations (claim 15's path weights once were: a mutant of them
was proved), is found: its mutant survives. Each substitution must match the source exactly
once, so an edit of ``_machine.py`` that moves a mutated text fails here until the mutant is
rewritten. The mutated module is written to a temporary folder and imported from there.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FOLDER = Path(__file__).resolve().parent
SOURCE = (FOLDER / "_machine.py").read_text()
TRAVERSAL_SOURCE = (FOLDER / "_machine_traversal.py").read_text()

ONE_V = ("single_token", "completion_law", "multi_draft", "token_trees")  # claim 1's obligations
ACCEPTANCE = (*ONE_V, "acceptance_rate", "block_verification")

# (what is mutated, the proofs that must each be refuted, the text, its replacement)
MUTANTS: list[tuple[str, tuple[str, ...], str, str]] = [
    # claim 15 (b): the review's two survivors, then the base h_k = w_k and the rest
    (
        "15: path weights w_i = w_{i-1} min(1, r_i)",
        ("block_verification",),
        "weights(i + 1) == z3_min(one, weights(i) * ratio(i))",
        "weights(i + 1) == weights(i) * z3_min(one, ratio(i))",
    ),
    (
        "15: path weights min(1, 1.001 w_{i-1} r_i)",
        ("block_verification",),
        "weights(i + 1) == z3_min(one, weights(i) * ratio(i))",
        "weights(i + 1) == z3_min(one, 1.001 * weights(i) * ratio(i))",
    ),
    (
        "15: path weights min(1, 0.999 w_{i-1} r_i)",
        ("block_verification",),
        "weights(i + 1) == z3_min(one, weights(i) * ratio(i))",
        "weights(i + 1) == z3_min(one, 0.999 * weights(i) * ratio(i))",
    ),
    (
        "15: path weights read r_{i+1} (index off by one)",
        ("block_verification",),
        "weights(i + 1) == z3_min(one, weights(i) * ratio(i))",
        "weights(i + 1) == z3_min(one, weights(i) * ratio(i + 1))",
    ),
    (
        "15: w_0 = 0.999",
        ("block_verification",),
        "[weights(0) == 1, token_level(0) == 1]",
        "[weights(0) == 0.999, token_level(0) == 1]",
    ),
    (
        "15: token-level product min(1, 0.999 r)",
        ("block_verification",),
        "token_level(i) * z3_min(one, ratio(i))",
        "token_level(i) * z3_min(one, 0.999 * ratio(i))",
    ),
    (
        "15: token-level product min dropped",
        ("block_verification",),
        "token_level(i) * z3_min(one, ratio(i))",
        "token_level(i) * ratio(i)",
    ),
    (
        "15: base h_k = 0.999 w_k",
        ("block_verification",),
        "h_last = scale * last",
        "h_last = 0.999 * scale * last",
    ),
    (
        "15: base h_k = 1.001 w_k",
        ("block_verification",),
        "h_last = scale * last",
        "h_last = 1.001 * scale * last",
    ),
    (
        "15: next weight min(1, 1.001 w p/q) in E",
        ("block_verification",),
        "else weight * self.ratio(x)",
        "else 1.001 * weight * self.ratio(x)",
    ),
    (
        "15: next weight min(1, 0.999 w p/q) in E",
        ("block_verification",),
        "else weight * self.ratio(x)",
        "else 0.999 * weight * self.ratio(x)",
    ),
    (
        "15: residual max(0, 0.999 w p - q)",
        ("block_verification",),
        "lambda i: z3_max(w * r.p(i) - r.q(i), zero)",
        "lambda i: z3_max(0.999 * w * r.p(i) - r.q(i), zero)",
    ),
    (
        "15: threshold h_i = 1.001 Z / (Z + 1 - w)",
        ("block_verification",),
        "h * denominator == scale * total_z",
        "h * denominator == 1.001 * scale * total_z",
    ),
    (
        "15: threshold's denominator Z + 1 - 0.999 w",
        ("block_verification",),
        "denominator = total_z + 1 - w",
        "denominator = total_z + 1 - 0.999 * w",
    ),
    (
        "15: resample from max(0, 0.999 w p - q) / Z",
        ("block_verification",),
        "resample * total_z == excess.term(z)",
        "resample * total_z == z3_max(0.999 * w * r.p(z) - r.q(z), zero)",
    ),
    (
        "15: completion's mass through z x 0.999",
        ("block_verification",),
        "(completed(i) - kept(i)) * row_p(i) + through(i)",
        "(completed(i) - kept(i)) * row_p(i) + 0.999 * through(i)",
    ),
    (
        "15: completion's mass through z reads p_{j+1} (index off by one)",
        ("block_verification",),
        "through(i) == kept(i) * row_p(i)",
        "through(i) == kept(i) * row_p(i + 1)",
    ),
    # the acceptance min(1, p/q) that claims 1, 2, 3, 15, 16 and 17 share
    (
        "acceptance min(1, 1.001 p/q)",
        ACCEPTANCE,
        "test = z3_min(z3.RealVal(1), z3.RealVal(scale) * ratio)",
        "test = z3_min(z3.RealVal(1), z3.RealVal(1.001 * scale) * ratio)",
    ),
    (
        "acceptance p/q (min dropped)",
        ACCEPTANCE,
        "test = z3_min(z3.RealVal(1), z3.RealVal(scale) * ratio)",
        "test = z3.RealVal(scale) * ratio",
    ),
    (
        "ratio r q = 0.999 p",
        ACCEPTANCE,
        "self.ratio(x) * self.q(x) == self.p(x)",
        "self.ratio(x) * self.q(x) == 0.999 * self.p(x)",
    ),
    (
        "a partial sum adds f(n + 1) (index off by one)",
        (*ACCEPTANCE, "exact_match"),
        "self.total(n + 1) == self.total(n) + self.term(n)",
        "self.total(n + 1) == self.total(n) + self.term(n + 1)",
    ),
    (
        "x in [0, V] (range off by one)",
        ("single_token", "exact_match", "block_verification", "multi_draft"),
        "return z3.And(0 <= x, x < vocab)",
        "return z3.And(0 <= x, x <= vocab)",
    ),
    # claim 1
    (
        "1: excess max(0, 0.999 p - q)",
        ("single_token", "completion_law"),
        'Sum(function("c1_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))',
        'Sum(function("c1_M"), lambda i: z3_max(0.999 * r.p(i) - r.q(i), z3.RealVal(0)))',
    ),
    (
        "1: resampled mass (1 - α) 1.001 res",
        ("single_token", "completion_law"),
        "(1 - accepted.total(r.vocab)) * resample",
        "(1 - accepted.total(r.vocab)) * 1.001 * resample",
    ),
    # claim 2
    (
        "2: the rejected branch completes from 0.999 T",
        ("completion_law", "token_trees"),
        "after_reject == target,",
        "after_reject == 0.999 * target,",
    ),
    # claim 3
    (
        "3: 2 m = p + q - 1.001 |p - q|",
        ("acceptance_rate",),
        "2 * alpha.term(i) == r.p(i) + r.q(i) - distance.term(i)",
        "2 * alpha.term(i) == r.p(i) + r.q(i) - 1.001 * distance.term(i)",
    ),
    (
        "3: |a| = -0.999 a below 0",
        ("acceptance_rate",),
        "return z3.If(a >= 0, a, -a)",
        "return z3.If(a >= 0, a, -0.999 * a)",
    ),
    (
        "3: excess max(0, 1.001 p - q)",
        ("acceptance_rate",),
        'Sum(function("c3_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))',
        'Sum(function("c3_M"), lambda i: z3_max(1.001 * r.p(i) - r.q(i), z3.RealVal(0)))',
    ),
    # claim 4
    (
        "4: per-token step T q min(1, p/q) = T p (min dropped)",
        ("accepted_length",),
        "prefix * r.accepted(n) == prefix * z3_min(r.p(n), r.q(n))",
        "prefix * r.accepted(n) == prefix * r.p(n)",
    ),
    (
        "4: tails P(τ >= i + 1) = 0.999 α P(τ >= i)",
        ("accepted_length",),
        "tail(j + 1) == tail(j) * a",
        "tail(j + 1) == tail(j) * a * 0.999",
    ),
    (
        "4: the mean adds α^j (index off by one)",
        ("accepted_length",),
        "mean(j + 1) == mean(j) + power(j + 1)",
        "mean(j + 1) == mean(j) + power(j)",
    ),
    # claim 7
    (
        "7: a matching draft emits y with 1.001 q p",
        ("exact_match",),
        "z3.If(i == y, r.q(i) * r.p(y),",
        "z3.If(i == y, r.q(i) * 1.001 * r.p(y),",
    ),
    (
        "7: exact match accepts 1.001 p q",
        ("exact_match",),
        'Sum(function("c7_E"), lambda i: r.p(i) * r.q(i))',
        'Sum(function("c7_E"), lambda i: 1.001 * r.p(i) * r.q(i))',
    ),
    # claim 14
    (
        "14: the box's first coordinate from a - 1 (off by one)",
        ("corner_lemma",),
        "            a <= t,\n            t <= b,\n            in_box(r),",
        "            a - 1 <= t,\n            t <= b,\n            in_box(r),",
    ),
    (
        "14: the line from a - 1 (off by one)",
        ("corner_lemma",),
        "            line(b),\n            a <= t,",
        "            line(b),\n            a - 1 <= t,",
    ),
    # claims 16 and 17
    (
        "16: after a rejection the others emit 0.999 r",
        ("multi_draft", "token_trees"),
        "(1 - accepted.total(r.vocab)) * rest",
        "(1 - accepted.total(r.vocab)) * 0.999 * rest",
    ),
    (
        "16: the residual r = norm(max(0, p - q)) x 1.001",
        ("multi_draft", "token_trees"),
        "rest * total == excess.term(y)",
        "rest * total == 1.001 * excess.term(y)",
    ),
]


def mutated_machine(old: str, new: str, folder: Path, tag: str) -> ModuleType:
    """``_machine.py`` with ``old`` (found exactly once) replaced by ``new``, imported from
    ``folder`` under its own name."""
    assert SOURCE.count(old) == 1, f"{old!r} occurs {SOURCE.count(old)} times in _machine.py"
    path = folder / f"_machine_{tag}.py"
    path.write_text(SOURCE.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while it executes
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[path.stem]
    return module


def refuted(module: ModuleType, name: str) -> bool:
    """Whether z3 (or sympy) refutes some obligation of the proof ``name`` as ``module`` builds
    it for the rule (not the control)."""
    return any(not step.decide() for step in module.PROOFS[name].build(False))


@pytest.mark.parametrize(("label", "proofs", "old", "new"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_every_mutant_of_an_encoding_is_refuted(
    label: str, proofs: tuple[str, ...], old: str, new: str, tmp_path: Path
) -> None:
    module = mutated_machine(
        old, new, tmp_path, f"mutant_{MUTANTS.index((label, proofs, old, new))}"
    )
    survived = [name for name in proofs if not refuted(module, name)]
    assert survived == [], (label, "proved by", survived)


def test_the_unmutated_copy_is_proved(tmp_path: Path) -> None:
    """The control of the test above: the same import with an identity substitution proves every
    proof, so a refutation comes from the mutation, not from the copy."""
    module = mutated_machine("SCALE = 0.999", "SCALE = 0.999", tmp_path, "identity")
    assert [name for name in module.PROOFS if refuted(module, name)] == []


def test_the_readme_counts_these_mutants() -> None:
    readme = (Path(__file__).resolve().parent / "README.md").read_text()
    assert f"{len(MUTANTS)} mutants" in " ".join(readme.split())


# claims 13 and 21 (``_machine_traversal.py``, which imports ``_machine``'s helpers unchanged)
TRAVERSAL_MUTANTS: list[tuple[str, tuple[str, ...], str, str]] = [
    (
        "13: a rejected draft's mass 0.999 s (q - a)",
        ("stopping_time",),
        "lambda i: verified(i) * (r.q(i) - r.accepted(i))",
        "lambda i: 0.999 * verified(i) * (r.q(i) - r.accepted(i))",
    ),
    (
        "13: the stopped position's mass 1.001 (1 - s) q",
        ("stopping_time",),
        "lambda i: (1 - verified(i)) * r.q(i)",
        "lambda i: 1.001 * (1 - verified(i)) * r.q(i)",
    ),
    (
        "13: a stopped position emits 1.001 p",
        ("stopping_time",),
        "+ bonus.total(r.vocab) * r.p(y)",
        "+ bonus.total(r.vocab) * 1.001 * r.p(y)",
    ),
    (
        "21: the parent's residual max(0, 1.001 w p - q)",
        ("traversal_verification",),
        "z3_max(w * r.p(i) - r.q(i), z3.RealVal(0))",
        "z3_max(1.001 * w * r.p(i) - r.q(i), z3.RealVal(0))",
    ),
    (
        "21: the parent's new weight 1.001 Z / (Z + 1 - w)",
        ("traversal_verification",),
        "z3.RealVal(SCALE if mutant else 1) * total_z",
        "z3.RealVal(SCALE if mutant else 1.001) * total_z",
    ),
    (
        "21: the new weight's denominator Z + 1.001 - w",
        ("traversal_verification",),
        "denominator = total_z + 1 - w",
        "denominator = total_z + 1.001 - w",
    ),
    (
        "21: the tree left emits 0.999 h res(y)",
        ("traversal_verification",),
        "rest = z3.If(total_z > 0, weight * res(y), 0)",
        "rest = z3.If(total_z > 0, 0.999 * weight * res(y), 0)",
    ),
]


def mutated_traversal(old: str, new: str, folder: Path, tag: str) -> ModuleType:
    """``_machine_traversal.py`` with ``old`` (found exactly once) replaced by ``new``,
    imported from ``folder`` under its own name (its ``_machine`` imports unchanged)."""
    count = TRAVERSAL_SOURCE.count(old)
    assert count == 1, f"{old!r} occurs {count} times in _machine_traversal.py"
    path = folder / f"_machine_traversal_{tag}.py"
    path.write_text(TRAVERSAL_SOURCE.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[path.stem]
    return module


@pytest.mark.parametrize(
    ("label", "proofs", "old", "new"), TRAVERSAL_MUTANTS, ids=[m[0] for m in TRAVERSAL_MUTANTS]
)
def test_every_mutant_of_claims_13_and_21_encodings_is_refuted(
    label: str, proofs: tuple[str, ...], old: str, new: str, tmp_path: Path
) -> None:
    tag = f"mutant_{TRAVERSAL_MUTANTS.index((label, proofs, old, new))}"
    module = mutated_traversal(old, new, tmp_path, tag)
    survived = [name for name in proofs if not refuted(module, name)]
    assert survived == [], (label, "proved by", survived)


def test_the_unmutated_traversal_copy_is_proved(tmp_path: Path) -> None:
    """The control: the identity substitution proves both proofs."""
    module = mutated_traversal("SCALE if mutant", "SCALE if mutant", tmp_path, "identity")
    assert [name for name in module.PROOFS if refuted(module, name)] == []


def test_the_readme_counts_the_traversal_mutants() -> None:
    readme = (FOLDER / "README.md").read_text()
    counted = f"{len(TRAVERSAL_MUTANTS)} mutants of `_machine_traversal.py`"
    assert counted in " ".join(readme.split())
