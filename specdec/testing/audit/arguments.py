"""The parser of ``specdec audit``: its arguments, option groups and help texts.

Every option is checked by argparse as it is parsed (a wrong value is a usage error, exit 2,
before anything is imported or run); which options apply to which form is checked after
parsing, from the subject's table (``specdec.testing.audit.contract.subject.APPLICABLE``, by
``specdec.testing.audit.command``).
"""

import argparse
import textwrap
from pathlib import Path
from typing import Any

from specdec.testing.audit.contract.argument_types import checked_type
from specdec.testing.audit.contract.flags import add_flags
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import DRAWS
from specdec.testing.audit.stream_arguments import add_stream_options

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


def _tolerance(name: str, value: float) -> float:
    """``--teacher-tolerance``: a finite float in ``[0, 1)``."""
    if not 0 <= value < 1:  # NaN fails too
        raise ValueError(f"{name} must be in [0, 1), got {value}.")
    return value


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
    audit.add_argument(
        "function", nargs="?", default=None,
        help="MODULE:FUNCTION or path/to/file.py:FUNCTION (none with --trace)",
    )  # fmt: skip
    audit.add_argument(
        "--trace", default=None, metavar="FILE",
        help="judge an engine's recorded steps offline (a specdec-trace file, "
        "specdec.testing.step_record.save_trace; docs/trace.md); takes --seed, "
        "--false-fail-rate, --false-pass-rate, --min-power-tv, --json, --quiet, --dry-run, "
        "and --target FILE:MODEL to compare the recorded target rows with its teacher-forced "
        "rows under the trace's law (--teacher-tolerance X, default 0.001)",
    )  # fmt: skip
    audit.add_argument(
        "--teacher-tolerance", type=checked_type(_tolerance, float), default=None,
        metavar="X", help="with --trace and --target: the largest absolute difference accepted "
        "between a recorded target row and the target's teacher-forced row (default 0.001)",
    )  # fmt: skip
    audit.add_argument("--step", action="store_true", help="audit a whole step, not a verifier")
    audit.add_argument("--batched", action="store_true", help="FUNCTION takes the batched form")
    add_flags(AuditOptions, {"main": audit}, only="main")  # --exact, --seed, --search...
    audit.add_argument("--quiet", action="store_true", help="no progress lines")
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
    add_flags(AuditOptions, {"power": group}, only="power")
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan on stderr (the scenarios, the search's budget, the invariance "
        "checks, the pilot, where the chunks are drawn, a stream's resolved mode; a statistical "
        "audit's samples at the chosen power and at a cheaper one, --detect-tv doubled) and "
        "exit 0 without calling FUNCTION; the plan and a pilot's time estimate are printed "
        "before any long statistical audit",
    )
    group.add_argument(
        "--fail-on-suboptimal",
        action="store_true",
        help="exit 7 when lossless but below token-level rejection sampling's tokens per step",
    )


class _ListScenarios(argparse.Action):
    """``--list-scenarios``: print the catalogue of both levels and exit (like ``--version``)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        # imported on use: the parser is built for every command, the catalogue loads the audit
        from specdec.testing.audit.judging.branches import listing
        from specdec.testing.audit.scenarios.catalogue import scenario_catalogue

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
judged against (specdec.testing.audit.judging.branches; multi-draft and tree: candidates drawn iid)
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
    add_flags(AuditOptions, {"engine": group}, only="engine")


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
    (``specdec.testing.audit.running.shard``, ``checkpoint``); docs/scale.md."""
    group = audit.add_argument_group(
        "scale (statistical verifier and step audits)",
        "Chunks are seeded by their index: the report is the same for any --workers.",
    )
    add_flags(AuditOptions, {"scale": group}, only="scale")
