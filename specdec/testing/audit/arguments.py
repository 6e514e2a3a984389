"""The parser of ``specdec audit``: its arguments, option groups and help texts.

Every option is checked by argparse as it is parsed (a wrong value is a usage error, exit 2,
before anything is imported or run); which options apply to which form is checked after
parsing, from the subject's table (``specdec.testing.audit.subject.APPLICABLE``, by
``specdec.testing.audit.command``).
"""

import argparse
import textwrap
from pathlib import Path
from typing import Any

from specdec._checks import (
    check_int,
    check_positive_int,
    check_rate,
)
from specdec.testing.audit.argument_types import checked_type
from specdec.testing.audit.options import SEARCHED_PAIRS
from specdec.testing.audit.stream_arguments import add_stream_options
from specdec.testing.audit.subject import DRAWS

__all__ = ["EPILOG", "add_parser"]

EPILOG = """\
signatures FUNCTION may have (V: vocabulary size, k: drafts; blocks are token ids):
  verifier (default)  fn(draft_tokens[k], draft_probs[k,V], target_probs[k+1,V], generator)
                        -> LongTensor[n], n in 1..k+1 (accepted drafts, then one token)
  --batched           the same with a leading batch axis N: -> LongTensor[N,k+1], -1-padded
  VerifyRule          fn(draft_tokens, draft_probs, target_probs, uniforms[..,k+1])
                        -> specdec.Verification (detected from its 4th parameter; needed
                        for --exact, which enumerates its uniforms)
  --step              fn(target_logits, draft_logits, prefix, k, generator, *, temperature,
                        top_k, top_p) -> LongTensor[n]; *_logits map token ids to logits
  --multi-draft DRAW  fn(draft_tokens[N,k], draft_probs[N,V], target_probs[N,V],
                        uniforms[N,k+1]) -> .token[N]: k candidates at one position, drawn
                        DRAW (iid, without_replacement, point_mass = the draft's top-k)
  --tree DRAW         fn(tree, draft_tokens[N,nodes], draft_probs[N,nodes+1,V],
                        target_probs[N,nodes+1,V], uniforms[N,nodes+1]) -> .tokens[N,depth+1]
                        (verify_tree's arguments), every node's children drawn DRAW
  --stream            sample(prompt[L], generator) -> LongTensor[>= n]: an engine's whole
                        generation (--batched: prompts[N,L] -> [N,>= n]), judged against
                        --target's law of the first --new-tokens tokens (exact-law mode)

examples:
  specdec audit specdec:verify_tokens                         the reference: LOSSLESS
  specdec audit specdec.testing.zoo:resample_from_target      a known bug: LOSSY, exit 1
  specdec audit my_engine.py:verify --detect-tv 0.05          less power, fewer samples
  specdec audit my_engine.py:verify --batched --json > r.json  a batched verifier, JSON out
  specdec audit specdec:verify_tokens --exact                 exact verdict, no sampling
  specdec audit my_engine.py:step --step                      a whole step, warping included
  specdec audit specdec.verify:verify_multi_iid --multi-draft iid   multi-draft, sampled
  specdec audit specdec.verify:verify_tree --tree point_mass --exact  a tree rule, exactly
  specdec audit specdec.testing.zoo:resample_from_target --plot pictures/
  specdec audit --stream engine.py:sample --target engine.py:target --prompts "1;2,3"
                --new-tokens 3 --temperature 0.7 --batched     an engine's stream"""


def add_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> argparse.ArgumentParser:
    """Add ``specdec audit`` to ``commands`` and return its parser."""
    audit = commands.add_parser(
        "audit",
        help="test a verifier (or a whole step) for losslessness",
        description=(
            "Audit MODULE:FUNCTION. Exit 0 LOSSLESS, 1 LOSSY, 2 usage error, 3 INCONCLUSIVE "
            "(--exact: cannot decide), 4 NONDETERMINISTIC, 5 INVALID-OUTPUT, 6 CRASH, 7 "
            "SUBOPTIMAL (with --fail-on-suboptimal), 8 INTERNAL-ERROR (specdec's own), 9 "
            "BATCH-DEPENDENT (with --invariance). "
            "FUNCTION is fn(draft_tokens[k], draft_probs[k,V], target_probs[k+1,V], "
            "generator) -> LongTensor[n]; with "
            "--batched the same with a leading batch axis; a VerifyRule fn(draft_tokens, "
            "draft_probs, target_probs, uniforms) -> Verification is detected; with --step "
            "fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, "
            "top_p) -> LongTensor[n]; with --multi-draft DRAW a multi-draft rule fn(draft_tokens"
            "[N,k], draft_probs[N,V], target_probs[N,V], uniforms[N,k+1]) -> result with "
            ".token[N]; with --tree DRAW a tree rule fn(tree, draft_tokens[N,nodes], "
            "draft_probs[N,nodes+1,V], target_probs[N,nodes+1,V], uniforms[N,nodes+1]) -> "
            "result with .tokens[N,depth+1]."
        ),
    )
    audit.add_argument("function", help="MODULE:FUNCTION or path/to/file.py:FUNCTION")
    audit.add_argument("--step", action="store_true", help="audit a whole step, not a verifier")
    audit.add_argument("--batched", action="store_true", help="FUNCTION takes the batched form")
    audit.add_argument("--seed", type=int, default=0, help="seed of everything drawn")
    audit.add_argument("--quiet", action="store_true", help="no progress lines")
    audit.add_argument(
        "--exact",
        action="store_true",
        help="exact verdict from the rule's own decisions (a VerifyRule: uniforms in); "
        "says 'cannot decide' where its randomness cannot be enumerated",
    )
    audit.add_argument(
        "--search",
        type=checked_type(lambda name, value: check_int(name, value, minimum=0), int),
        default=None,
        help=f"searched toy pairs --exact adds to its battery, --scenarios or not (default "
        f"{SEARCHED_PAIRS}; 0: none); without --exact (verifiers), N adversarial pairs join "
        "the statistical battery: small residuals, near ties, sparse and one-hot rows "
        "(default none); also the coverage-guided search's budget",
    )
    audit.add_argument(
        "--no-coverage",
        action="store_true",
        help="neither measure which branches of FUNCTION's own code the scenarios reach nor "
        "(verifiers) search pairs that reach the others (by default both: --search N sets the "
        "search's budget, 8 N candidates, at most N kept; steps, multi-draft and tree rules "
        "are measured during the audit's own calls, with no search)",
    )
    audit.add_argument("--json", action="store_true", help="print the whole report as JSON")
    multi = audit.add_mutually_exclusive_group()
    multi.add_argument(
        "--multi-draft",
        choices=DRAWS,
        default=None,
        metavar="DRAW",
        help="FUNCTION is a multi-draft rule (k candidates at one position) on candidates "
        f"drawn DRAW ({', '.join(DRAWS)}): its own battery; statistical, or with --exact exact; "
        "takes --exact, --json, --samples, --detect-tv, --min-power-tv, --false-fail-rate, "
        "--false-pass-rate, --seed, --scenarios (v4-zero-target, v4-dyadic), --quiet",
    )
    multi.add_argument(
        "--tree",
        choices=DRAWS,
        default=None,
        metavar="DRAW",
        help="FUNCTION is a tree rule (verify_tree's arguments) on trees whose children are "
        "drawn DRAW: as --multi-draft (--scenarios two-then-one, two-branches)",
    )
    _add_audit_options(audit)
    add_stream_options(audit)
    _add_engine_options(audit)
    _add_audit_plot(audit)
    _add_scale_options(audit)
    audit.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the epilog's lines
    audit.epilog = EPILOG
    audit.description = textwrap.fill(audit.description or "", 88)
    return audit


def _add_audit_options(audit: argparse.ArgumentParser) -> None:
    """Power, verdict-class and CI options of ``specdec audit`` (each checked by argparse)."""

    def rate(name: str, value: float) -> float:
        return check_rate(name, value)

    def distance(name: str, value: float) -> float:
        return check_rate(name, value, include_one=True)

    group = audit.add_argument_group(
        "power and verdicts",
        "The verdict classes and their exit codes: 0 LOSSLESS (no deviation of the reported "
        "TV found), 1 LOSSY, 2 usage error, 3 INCONCLUSIVE (no deviation found, but a scenario's "
        "power is below --min-power-tv; the report says how many samples would decide; "
        "--exact: cannot decide), 4 NONDETERMINISTIC (same seed, different blocks: not a "
        "finding about the law), 5 INVALID-OUTPUT (not a block, or more tokens per call than "
        "any lossless single step emits on average: the blocks are not one step's output; "
        "see --blocks-span-steps), "
        "6 CRASH of the audited function (or of a helper you gave: --target-warp, "
        "--target-sampler; the message names it), "
        "7 SUBOPTIMAL (lossless, fewer tokens per step than rejection sampling; only with "
        "--fail-on-suboptimal), 8 INTERNAL-ERROR (specdec itself failed: please report it), "
        "9 BATCH-DEPENDENT (with --invariance). "
        "Scenarios whose options the function rejects (it raises NotImplementedError or "
        "ValueError on the first call) are NOT AUDITED: the headline and --json's "
        "not_audited list them, and they leave the exit code unchanged. Every option is "
        "checked before anything runs.",
    )
    size = group.add_mutually_exclusive_group()
    size.add_argument(
        "--samples",
        type=checked_type(check_positive_int, int),
        default=None,
        help="fixed samples per scenario (>= 1); the report states the power it bought "
        "(instead of --detect-tv)",
    )
    size.add_argument(
        "--detect-tv",
        type=checked_type(distance, float),
        default=None,
        metavar="X",
        help="size each scenario to detect a deviation of total variation >= X with the "
        "false-pass rate (default 0.01 batched, 0.05 single-sequence: a single-sequence "
        "function is called once per sample, about 466,000 times over the verifier battery)",
    )
    group.add_argument(
        "--min-power-tv",
        type=checked_type(distance, float),
        default=None,
        metavar="X",
        help="INCONCLUSIVE when a scenario cannot detect TV X (default 0.05, or --detect-tv "
        "when larger)",
    )
    group.add_argument(
        "--false-fail-rate",
        type=checked_type(rate, float),
        default=1e-6,
        help="family-wise rate of calling a lossless function lossy, in (0, 1) (default 1e-6)",
    )
    group.add_argument(
        "--false-pass-rate",
        type=checked_type(rate, float),
        default=1e-3,
        help="rate of missing a deviation of the printed detectable TV, in (0, 1) (default 1e-3)",
    )
    group.add_argument(
        "--allow-nondeterministic",
        action="store_true",
        help="judge the law alone (a function drawing from torch's global RNG gives different "
        "blocks under one seed; its law is still tested)",
    )
    group.add_argument(
        "--blocks-span-steps",
        action="store_true",
        help="accept more tokens per call than any lossless single step emits on average "
        "(a loop returning k+1 tokens over several steps) and judge the law alone; without "
        "it such blocks are INVALID-OUTPUT (exit 5)",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="time a pilot (the function on the first scenario), print on stderr how long the "
        "statistical audit would take at the chosen power and at a cheaper one (--detect-tv "
        "doubled), and exit 0 without auditing; the same estimate is printed before any long "
        "statistical audit",
    )
    group.add_argument(
        "--fail-on-suboptimal",
        action="store_true",
        help="exit 7 when lossless but below token-level rejection sampling's tokens per step",
    )
    group.add_argument(
        "--invariance",
        action="store_true",
        help="also run each scenario's rows alone and inside mixed batches (other rows greedy "
        "or sampled, seeded or not, of another scenario; other batch sizes and positions) and "
        "exit 9 BATCH-DEPENDENT when a row's law, or a seeded row's output for its seed, "
        "changes with its batch (exact where its random values or seed can be paired, else a "
        "two-sample test; batched verifiers, VerifyRules and batched steps)",
    )


class _ListScenarios(argparse.Action):
    """``--list-scenarios``: print the catalogue of both levels and exit (like ``--version``)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        # imported on use: the parser is built for every command, the catalogue loads the audit
        from specdec.testing.audit.branches import listing
        from specdec.testing.audit.catalogue import scenario_catalogue

        headings = {
            "verifier": "verifier scenarios (* in the default battery):",
            "step": "step scenarios (* in the default battery):",
            "position": "--multi-draft scenarios (all in the default battery):",
            "tree": "--tree scenarios (all in the default battery):",
        }
        print(BRANCHES_NOTE)
        for level, heading in headings.items():
            print(heading)
            branches = listing(level)
            for name, (scenario, default) in scenario_catalogue(level).items():
                print(f"  {'*' if default else ' '} {name:<24} {scenario.description}")
                print("\n".join(branches[name]))
        parser.exit()


BRANCHES_NOTE = """\
Under each scenario: the probability that one sample takes each branch of the rule it is
judged against (specdec.testing.audit.branches; multi-draft and tree: candidates drawn iid)
and, in the default battery, the expected number of samples taking it at the default sample
size (detect-tv 0.05 for verifiers and steps, 0.01 for --multi-draft and --tree); 'rare':
below 20, so a bug living only there may go unseen.
"""


def _add_engine_options(audit: argparse.ArgumentParser) -> None:
    """The options for engines' conventions and realistic inputs, in their own group."""
    group = audit.add_argument_group("engine conventions and inputs")
    group.add_argument(
        "--scenarios",
        default=None,
        help="NAME,... scenarios to run instead of the default battery (--list-scenarios)",
    )
    group.add_argument(
        "--list-scenarios",
        action=_ListScenarios,
        nargs=0,
        help="list every scenario (verifier, step, --multi-draft, --tree) and exit; under "
        "each, how often one sample takes each branch of the rule it is judged against "
        "(the reference's branches, not FUNCTION's own code: an audit of a verifier reports "
        "which branches of FUNCTION's code its scenarios reached, see --no-coverage)",
    )
    group.add_argument(
        "--scenario-file",
        default=None,
        metavar="FILE",
        help='your own scenarios: FILE.json (a pair of rows {"target": [...], "draft": '
        '[...], "k": 2}, rows per context, a list of them) or FILE.py[:NAME] (NAME, default '
        "'scenarios': a list of scenarios or a function returning one); they replace the "
        "default battery (with --scenarios, join the named ones); fields in docs/audit.md",
    )
    group.add_argument(
        "--reserved-ids",
        default=None,
        help="ID,... token ids the engine reserves (EOS...): probability 0 in every toy row, "
        "an emitted one is an invalid output",
    )
    group.add_argument(
        "--target-warp",
        default=None,
        help="(--step) MODULE:FUNCTION, the engine's warp(logits, *, temperature, top_k, top_p) "
        "-> probs: the verdict is about verification given it; the report says how far it is "
        "from specdec's warping",
    )
    group.add_argument(
        "--target-sampler",
        default=None,
        help="(--step) MODULE:FUNCTION, the engine's sampler(logits, generator, *, temperature, "
        "top_k, top_p) -> tokens: a two-sample test against its own target law (sized by "
        "--detect-tv with the two-sample formula: about 4x the samples, for both samples)",
    )
    group.add_argument(
        "--dtype",
        choices=("float64", "float32", "bfloat16", "float16"),
        default=None,
        help="dtype of the rows (verifier) or logits (step) the function gets (default float64); "
        "with --exact also the dtype the engine computes in: a law within its rounding bound "
        "is LOSSLESS up to that dtype's rounding",
    )
    group.add_argument(
        "--device", default=None, help="cpu or cuda[:N] (an error where CUDA is absent)"
    )
    group.add_argument(
        "--ragged",
        action="store_true",
        default=None,
        help="(--batched verifier) rows draft their own k_n in 1..k, told by the keyword "
        "num_drafts; padding -1 / zero rows (specdec.testing.audit.ragged)",
    )
    group.add_argument(
        "--model-interface",
        choices=("logits", "transformers"),
        default=None,
        help="(--step) hand the step plain logits callables (default) or transformers-like "
        "models: model(input_ids, cache=..., use_cache=...).logits, .config",
    )


def _add_audit_plot(audit: argparse.ArgumentParser) -> None:
    audit.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        default=None,
        help="also write DIR/audit_law.png: each scenario's observed against exact law (its "
        "most deviant cells), lossy scenarios in red; with --exact DIR/audit_exact.png, the "
        "exact TV per scenario (needs pip install 'specdec[plot]')",
    )


def _add_scale_options(audit: argparse.ArgumentParser) -> None:
    """Where the statistical audit of a verifier or step draws, and its checkpoints
    (``specdec.testing.audit.shard``, ``checkpoint``); docs/scale.md."""
    group = audit.add_argument_group(
        "scale (statistical verifier and step audits)",
        "Chunks are seeded by their index: the report is the same for any --workers.",
    )
    group.add_argument(
        "--workers",
        type=checked_type(check_positive_int, int),
        default=None,
        metavar="N",
        help="draw the chunks on N local processes (FUNCTION is imported by name in each); "
        "the same report as --workers 1 (default)",
    )
    group.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        default=None,
        help="write the merged counts and e-process state to FILE (JSON) after each chunk, "
        "atomically",
    )
    group.add_argument(
        "--resume",
        type=Path,
        metavar="FILE",
        default=None,
        help="continue from the checkpoint FILE (refused if another audit or version wrote it, "
        "or it was changed) and keep checkpointing to it: the same report as a run never "
        "interrupted",
    )
