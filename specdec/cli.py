"""The ``specdec`` command: ``specdec demo`` (more subcommands arrive with the audit)."""

import argparse
import sys
from collections.abc import Sequence

from specdec.demo import run_demo

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 success, 2 usage error)."""
    parser = argparse.ArgumentParser(
        prog="specdec", description="Reference implementation and oracle for speculative decoding."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="walk through one speculative step and its exact law")
    demo.add_argument("--seed", type=int, default=0, help="seed of the toy pair (default 0)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        print(run_demo(seed=args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
