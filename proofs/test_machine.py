"""``proofs/_machine.py``'s own machinery: a proof from contradictory assumptions, a proof whose
control is also proved, and an identity sympy cannot settle are each rejected, so a passing
machine proof means what its label says."""

import pytest
import sympy
import z3
from _machine import MachineProof, Obligation, Step, SympyIdentity, induction


def _proof(build: list[Step], control: list[Step]) -> MachineProof:
    return MachineProof("0", "toy", "every V", "toy", "toy", lambda m: control if m else build)


def test_a_true_obligation_is_proved_and_a_false_one_refuted() -> None:
    a = z3.Real("a")
    assert Obligation("square", (), a * a >= 0).decide()
    assert not Obligation("positive", (), a > 0).decide()


def test_contradictory_assumptions_make_a_proof_vacuous() -> None:
    a = z3.Real("a")
    vacuous = Obligation("anything", (a > 1, a < 0), a == 7)
    assert vacuous.decide()  # proved, but from nothing
    with pytest.raises(AssertionError, match="contradictory"):
        _proof([vacuous], [Obligation("no", (), a > 0)]).prove()


def test_a_control_that_is_proved_fails_the_proof() -> None:
    a = z3.Real("a")
    holds = Obligation("square", (), a * a >= 0)
    _proof([holds], [Obligation("no", (), a > 0)]).refute_control()
    with pytest.raises(AssertionError, match="control"):
        _proof([holds], [holds]).refute_control()


def test_induction_needs_its_step() -> None:
    f = z3.Function("f", z3.IntSort(), z3.RealSort())
    # f(n + 1) = f(n) + 1 keeps f(n) >= 0; f(n + 1) = f(n) - 1 does not.
    up = induction("up", lambda n: f(n) >= 0, [f(0) == 0], lambda n: [f(n + 1) == f(n) + 1])
    down = induction("down", lambda n: f(n) >= 0, [f(0) == 0], lambda n: [f(n + 1) == f(n) - 1])
    assert [o.decide() for o in up] == [True, True]
    assert [o.decide() for o in down] == [True, False]


def test_a_sympy_identity_is_refuted_only_at_a_witness() -> None:
    x = sympy.Symbol("x")
    assert SympyIdentity("zero", (x + 1) ** 2 - x**2 - 2 * x - 1, ()).decide()
    assert not SympyIdentity("not zero", x**2 - x, ({x: sympy.Integer(2)},)).decide()
    with pytest.raises(RuntimeError, match="could not decide"):
        SympyIdentity("no witness", x**2 - x, ({x: sympy.Integer(1)},)).decide()
