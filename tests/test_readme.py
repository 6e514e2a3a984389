"""The README's two commands are the project's contract: CI runs the second one verbatim."""

import re
from pathlib import Path

from specdec.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_starts_with_exactly_two_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("specdec demo")
    assert all("torch==2.13.0" in command for command in commands)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci_lines


def test_demo_prints_the_walkthrough_and_an_exact_match(capsys: object) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "emitted block: sat on the" in out
    assert re.search(r"completion law == target law over all \d+ sequences: True", out)


def test_the_real_model_snippet_stops_at_the_end_of_turn_token() -> None:
    text = (ROOT / "docs" / "generation.md").read_text()  # moved there from the README
    section = text.split("## On a real model", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "eos_token_id=tokenizer.eos_token_id" in snippet
    assert "apply_chat_template" in snippet and "tokens >= 0" in snippet
