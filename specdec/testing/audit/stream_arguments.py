"""The ``--stream`` options of ``specdec audit``: the target, the prompts, the claimed law.

One option group of the parser ``arguments.add_parser`` builds; each option is checked by
argparse as it is parsed (``argument_types``), and which apply to a stream is checked after
parsing, from the subject's table (``specdec.testing.audit.contract.subject.APPLICABLE``).
"""

import argparse

from specdec._checks import check_finite, check_positive_int, check_probability_threshold
from specdec.testing.audit.contract.argument_types import checked_type
from specdec.testing.audit.contract.flags import add_flags
from specdec.testing.audit.contract.stream_options import StreamOptions

__all__ = ["STREAM_FLAGS", "add_stream_options"]

STREAM_FLAGS = {
    "target": "--target",
    "prompts": "--prompts",
    "new_tokens": "--new-tokens",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "min_p": "--min-p",
}
"""The flags of ``--stream`` that make its scenarios (the target, the prompts, the claimed
law: not options of a record); its ``StreamOptions`` flags come from that record's fields."""


def add_stream_options(audit: argparse.ArgumentParser) -> None:
    """``--stream`` and what it needs: the target, the prompts, the claimed sampling law."""

    def temperature(name: str, value: float) -> float:
        if not 0 <= check_finite(name, value):
            raise ValueError(f"{name} must be >= 0, got {value}.")
        return value

    group = audit.add_argument_group(
        "streams (--stream)",
        "FUNCTION is an engine's whole generation, sample(prompt[L], generator) -> new tokens "
        "(--batched: prompts[N,L] -> [N,n]); the first --new-tokens tokens after each prompt "
        "are judged against the law --target gives them under the sampling options, "
        "enumerated by teacher forcing (exact-law mode: V ** new-tokens at most 65536; above, "
        "large-vocabulary mode, see --stream-mode). One scenario per prompt (prompt-0, ...). "
        "Takes --batched, --samples, --detect-tv, --min-power-tv, --false-fail-rate, "
        "--false-pass-rate, --seed, "
        "--allow-nondeterministic, --json, --quiet.",
    )
    group.add_argument("--stream", action="store_true", help="FUNCTION is a stream sampler")
    group.add_argument(
        "--target",
        default=None,
        metavar="FILE:MODEL",
        help="the target: a specdec CausalLM or transformers causal LM, or a function of no "
        "arguments returning one",
    )
    group.add_argument(
        "--prompts",
        default=None,
        help="ID,...;ID,... the prompts, token ids separated by commas, prompts by semicolons",
    )
    group.add_argument(
        "--new-tokens",
        type=checked_type(check_positive_int, int),
        default=None,
        metavar="N",
        help="new tokens judged after each prompt (default 2)",
    )
    group.add_argument(
        "--temperature",
        type=checked_type(temperature, float),
        default=None,
        help="the claimed law's temperature (default 1; 0: greedy)",
    )
    group.add_argument(
        "--top-k", type=checked_type(check_positive_int, int), default=None, help="its top-k"
    )
    group.add_argument(
        "--top-p",
        type=checked_type(check_probability_threshold, float),
        default=None,
        help="its top-p",
    )
    group.add_argument(
        "--min-p",
        type=checked_type(check_probability_threshold, float),
        default=None,
        help="its min-p",
    )
    add_flags(StreamOptions, {"streams": group})
