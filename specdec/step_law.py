r"""The exact law of a whole ``speculative_step`` on toy models, from its own decisions.

``specdec.discover`` computes a verification rule's law given a drafted block; here the grid
engine (``proofs/theory.md``, claim 14) runs the library's *step* itself: drafting from the
draft's rows with the ``k`` drafting uniforms, one target pass, the rule with the ``k + 1``
verification uniforms, the stopping rule, on ``ToyLM`` models whose rows are exact fractions.
The step's ``2k + 1`` uniforms are enumerated on their ``2^-53`` grid.

The engine is exact for interval-decided functions. A step's emitted block alone is not one
along a drafting uniform (two different drafts can both be rejected and corrected to the same
token, with a third draft between them that is accepted), so the evaluated output is the pair
(drafts made, emitted block): along ``u_i`` the draft ``x_{i+1}`` moves through the tokens in
order and everything after it is fixed by it, so each output's preimage is an interval. The
block's law is that pair's law summed over the drafts.

Example:
    >>> import specdec
    >>> from specdec.discover import exact_verdict
    >>> from specdec.exact import completion_law, target_law
    >>> from specdec.models.toy import make_toy_pair
    >>> pair = make_toy_pair(3, seed=0)
    >>> found = step_block_law(pair.target, pair.draft, (1,), 2)
    >>> verdict = exact_verdict(
    ...     completion_law(found.law, pair.target, (1,), 2), target_law(pair.target, (1,), 3))
    >>> found.status, verdict.lossless
    ('exact', True)
"""

from fractions import Fraction

import torch
from torch import Tensor

from specdec._checks import check_int, check_positive_int, check_same_vocabulary
from specdec._grid import GRID, BatchEvaluator, box_volumes, explore
from specdec.discover import Discovery
from specdec.exact import Law
from specdec.generate import generate_speculative  # the loop under audit
from specdec.models.base import CausalLM
from specdec.models.toy import ToyModel
from specdec.models.toy_lm import ToyLM
from specdec.step import StepState, speculative_step
from specdec.stopping import NEVER, StoppingRule
from specdec.supply import Supply
from specdec.types import VerifyRule
from specdec.verify import verify_tokens
from specdec.warp import SamplingOptions

__all__ = ["generation_law", "step_block_law"]


class _Step(BatchEvaluator):
    """``steps`` steps from ``prefix``: grid indices ``[n, steps (2k+1)]`` to, per step, (drafts,
    ``-1``-padded to ``k``; the emitted block, ``-1``-padded to ``k + 1``)."""

    def __init__(
        self,
        target: ToyModel,
        draft: CausalLM,
        prefix: tuple[int, ...],
        k: int,
        steps: int,
        rule: VerifyRule,
        stopping: StoppingRule,
        options: tuple[SamplingOptions, SamplingOptions],
    ) -> None:
        self.models = (ToyLM(target), draft)
        self.options = options
        self.prefix = torch.tensor(prefix, dtype=torch.int64)
        self.k, self.steps, self.rule, self.stopping = k, steps, rule, stopping
        self.dims = self.width = steps * (2 * k + 1)
        self.evaluations = 0

    def alone(self, indices: Tensor) -> Tensor:
        """The steps' drafts and blocks at ``indices``, ``steps`` steps on ``n`` rows."""
        n, k = indices.shape[0], self.k
        self.evaluations += n
        uniforms = indices.to(torch.float64) / GRID  # exact: m < 2^53, a power-of-two scale
        state, parts = StepState.initial(self.prefix.expand(n, -1)), []
        for step in range(self.steps):
            own = uniforms[:, step * (2 * k + 1) : (step + 1) * (2 * k + 1)]  # [n, 2k+1]
            outcome = speculative_step(
                *self.models,
                state,
                rule=self.rule,
                target_options=self.options[0],
                draft_options=self.options[1],
                draft_uniforms=own[:, :k],
                verify_uniforms=own[:, k:],
                stopping=self.stopping,
            )
            drafts = outcome.draft.tokens  # [n, d], d = the batch's longest block <= k
            made = torch.arange(drafts.shape[1]) < outcome.lengths[:, None]
            drafts = torch.where(made, drafts, -1)  # a row's own drafts: the batch's not shown
            block = outcome.verification.tokens  # [n, d + 1]
            pad = torch.full((n, k - drafts.shape[1]), -1, dtype=torch.int64)
            parts += [drafts, pad, block, pad]
            state = outcome.state
        return torch.cat(parts, dim=1)


def step_block_law(
    target: ToyModel,
    draft: ToyModel | CausalLM,
    prefix: tuple[int, ...],
    k: int,
    *,
    steps: int = 1,
    rule: VerifyRule = verify_tokens,
    target_options: SamplingOptions | None = None,
    draft_options: SamplingOptions | None = None,
    stopping: StoppingRule = NEVER,
    probes: int = 4,
    seed: int = 0,
) -> Discovery:
    r"""The exact law of the block ``speculative_step`` emits from ``prefix`` on toy models.

    .. math::
        P(S = s) = 2^{-53(2k+1)}\,\#\{m \in [0, 2^{53})^{2k+1} :
        \mathrm{step}(m\,2^{-53}) \text{ emits } s\}

    Any rule, stopping rule and sampling options of the step; the law the blocks must follow is
    the target's rows *warped by* ``target_options`` (the caller builds that target law, e.g. a
    toy model of the rational top-k rows).

    Args:
        target: the target toy model.
        draft: a toy model on the target's vocabulary, or any draft model for the step (a
            ``MappedDraft`` of a toy model with another vocabulary, an ``NGramDraft``).
        prefix: the prompt (at least one token).
        k: drafts per step, ``>= 1``.
        target_options: the target's sampling options (default: temperature 1, no filter).
        draft_options: the draft's (default: the target's).
        steps: consecutive steps (the second reads the caches the first rolled back); the law
            is then that of the concatenated blocks. The product partition multiplies the
            steps' cuts: two steps are practical for V = 2, k = 1 (seconds); larger scenarios
            stop at the engine's caps (``outside-class``, never a law).
        rule: the verification rule the step calls.
        stopping: the step's stopping rule.
        probes: seeded interior probes per box (the engine's guards).
        seed: seed of the probes.

    Returns:
        A ``Discovery`` whose ``law`` is the emitted block's (``status == "exact"``); the
        ``cuts`` are per uniform, drafting uniforms first.
    """
    check_positive_int("k", k)
    check_positive_int("steps", steps)
    check_int("probes", probes, minimum=1)
    check_same_vocabulary(target.vocab_size, draft.vocab_size, wrap_hint=False)
    if not prefix:
        raise ValueError("prefix must hold at least one token (the step's prompt).")
    model = ToyLM(draft) if isinstance(draft, ToyModel) else draft
    target_law_options = SamplingOptions() if target_options is None else target_options
    options = (target_law_options, target_law_options if draft_options is None else draft_options)
    evaluate = _Step(target, model, tuple(prefix), k, steps, rule, stopping, options)
    start: list[list[Fraction]] = [[] for _ in range(evaluate.dims)]
    status, evidence, cuts, outputs = explore(evaluate, start, probes, seed)
    counts = tuple(len(c) - 2 for c in cuts)
    if outputs is None:
        return Discovery(status, None, evidence, evaluate.evaluations, counts)
    law: Law = {}
    width = 2 * k + 1
    for output, prob in box_volumes(cuts, outputs).items():
        blocks = [output[s * width + k : (s + 1) * width] for s in range(steps)]
        emitted = tuple(token for block in blocks for token in block if token >= 0)
        law[emitted] = law.get(emitted, Fraction(0)) + prob
    return Discovery("exact", law, evidence, evaluate.evaluations, counts)


class _Generation(BatchEvaluator):
    """``generate_speculative`` from ``prefix``: grid indices ``[n, D]`` (the uniforms its
    generator would give, ``D`` enough for the longest run) to the generated tokens ``[n, m]``;
    the draws are fed by ``specdec.supply.Supply``."""

    def __init__(
        self,
        target: ToyModel,
        draft: CausalLM,
        prefix: tuple[int, ...],
        k: int,
        max_new_tokens: int,
        rule: VerifyRule,
    ) -> None:
        self.models = (ToyLM(target), draft)
        self.prefix = torch.tensor(prefix, dtype=torch.int64)
        self.k, self.max_new_tokens, self.rule = k, max_new_tokens, rule
        self.dims = max_new_tokens * (2 * k + 1)  # at most one step per token
        self.width = max_new_tokens
        self.evaluations = 0

    def alone(self, indices: Tensor) -> Tensor:
        """The generated tokens at ``indices``, one ``generate_speculative`` call on ``n`` rows."""
        n = indices.shape[0]
        self.evaluations += n
        with Supply(indices.to(torch.float64) / GRID, rows=n):
            out = generate_speculative(
                *self.models,
                self.prefix.expand(n, -1),
                k=self.k,
                max_new_tokens=self.max_new_tokens,
                generator=torch.Generator(),
                rule=self.rule,
            )
        return out.tokens


def generation_law(
    target: ToyModel,
    draft: ToyModel | CausalLM,
    prefix: tuple[int, ...],
    *,
    k: int,
    max_new_tokens: int,
    rule: VerifyRule = verify_tokens,
    probes: int = 4,
    seed: int = 0,
) -> Discovery:
    """The exact law of the tokens ``generate_speculative`` returns, the loop itself included
    (budget, the last step's shorter blocks, rollback between steps), on toy models.

    Its generator's uniforms are fed from the grid (``specdec.supply``), enough for one
    step per token. The tokens alone are interval-decided when ``V = 2`` (a line's outputs then
    split it into at most two runs per decision); with more tokens use ``step_block_law``.

    Returns:
        A ``Discovery`` over the generated sequences (``max_new_tokens`` tokens each).

    Raises:
        ValueError: a vocabulary other than 2, bad ``k`` or budget, an empty prefix.
    """
    check_positive_int("k", k)
    check_positive_int("max_new_tokens", max_new_tokens)
    check_int("probes", probes, minimum=1)
    if target.vocab_size != 2:
        raise ValueError(
            f"generation_law needs V = 2 (its tokens alone are interval-decided only there), "
            f"got V = {target.vocab_size}; use step_block_law for larger vocabularies."
        )
    if not prefix:
        raise ValueError("prefix must hold at least one token (the prompt).")
    model = ToyLM(draft) if isinstance(draft, ToyModel) else draft
    evaluate = _Generation(target, model, tuple(prefix), k, max_new_tokens, rule)
    start: list[list[Fraction]] = [[] for _ in range(evaluate.dims)]
    status, evidence, cuts, outputs = explore(evaluate, start, probes, seed)
    counts = tuple(len(c) - 2 for c in cuts)
    if outputs is None:
        return Discovery(status, None, evidence, evaluate.evaluations, counts)
    return Discovery("exact", box_volumes(cuts, outputs), evidence, evaluate.evaluations, counts)
