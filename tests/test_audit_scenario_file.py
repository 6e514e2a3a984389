"""``specdec audit --scenario-file``: custom scenarios from JSON or Python, errors where they arose.

Every path of ``specdec.testing.audit.scenarios.scenario_file`` with a hand-written file: a pair of
rows read exactly (and audited: the reference LOSSLESS, a known bug LOSSY, exactly: no sampling, no
error rates), rows per context, a multi-draft and a tree scenario, a Python file (a list and a
function), and each error: a usage error naming the file and the field (exit 2), the file's own
code crashing (exit 6, named as the file's, never as the audited function's), and specdec's
own failure while reading it (exit 8).
"""

import json
from fractions import Fraction
from pathlib import Path
from unittest import mock

import pytest

from specdec.cli import main
from specdec.testing import zoo
from specdec.testing.audit import ExitCode, audit_step
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.scenarios.scenario_file import ScenarioFileError, load_scenario_file

F = Fraction
PAIR = {"name": "pair", "target": ["1/2", "1/3", "1/6"], "draft": [0.5, 0.25, 0.25], "k": 2}


def _write(folder: Path, name: str, content: object) -> str:
    path = folder / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_a_json_pair_of_rows_is_read_exactly(tmp_path: Path) -> None:
    (scenario,) = load_scenario_file(_write(tmp_path, "p.json", PAIR), "verifier")
    assert scenario.name == "pair" and scenario.k == 2 and scenario.prefix == (0,)
    assert scenario.pair.target.probs([2]) == (F(1, 2), F(1, 3), F(1, 6))  # every context
    assert scenario.pair.draft.probs([]) == (F(1, 2), F(1, 4), F(1, 4))  # 0.25 read as 1/4


def test_rows_per_context_and_step_options(tmp_path: Path) -> None:
    rows = [["1/2", "1/2"], ["1/4", "3/4"], ["1", "0"]]  # after 0, after 1, at the start
    data = {"scenarios": [{"target": rows, "draft": ["1/2", "1/2"], "temperature": 0.5,
                           "top_k": 1, "prefix": [1]}]}  # fmt: skip
    (scenario,) = load_scenario_file(_write(tmp_path, "c.json", data), "step")
    assert scenario.pair.target.probs([1]) == (F(1, 4), F(3, 4))
    assert scenario.pair.target.probs([]) == (F(1), F(0))
    assert (scenario.temperature, scenario.top_k, scenario.top_p) == (0.5, 1, None)


def test_position_and_tree_scenarios(tmp_path: Path) -> None:
    (position,) = load_scenario_file(_write(tmp_path, "m.json", PAIR), "position")
    assert isinstance(position, PositionScenario) and position.k == 2
    tree = {"vocab": 3, "seed": 4, "parents": [-1, -1, 0], "temperature": 0.7, "top_k": 2}
    (scenario,) = load_scenario_file(_write(tmp_path, "t.json", tree), "tree")
    assert isinstance(scenario, TreeScenario) and scenario.top_k == 2
    assert all(sum(row) == 1 for row in scenario.pair().target.rows)


def test_a_python_file_gives_a_list_or_a_function(tmp_path: Path) -> None:
    code = (
        "from specdec.testing.audit import verifier_scenarios\n"
        "chosen = verifier_scenarios()[:1]\n"
        "def scenarios():\n"
        f"    return [{PAIR!r}]\n"
    )
    path = _write(tmp_path, "s.py", code)
    assert [s.name for s in load_scenario_file(path, "verifier")] == ["pair"]
    assert [s.name for s in load_scenario_file(f"{path}:chosen", "verifier")] == ["context-v4-k2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({**PAIR, "target": [0.5, 0.3, 0.1]}, r"scenarios\[0\].target: the row sums to 0.9"),
        ({**PAIR, "draft": ["1/2", "x", "1/2"]}, r"scenarios\[0\].draft\[1\]: expected a prob"),
        ({**PAIR, "k": 0}, r"scenarios\[0\].k: expected an integer >= 1, got 0"),
        ({**PAIR, "prefix": [7]}, r"scenarios\[0\].prefix: expected a non-empty list"),
        ({**PAIR, "colour": 1}, r"unknown field\(s\) \['colour'\]"),
        ({"draft": ["1/2", "1/2"]}, r"scenarios\[0\]: missing field 'target'"),
        ([PAIR, PAIR], r"names must be distinct, \['pair'\] repeat"),
        ([], "expected a scenario, a list of scenarios"),
        ({**PAIR, "target": ["1", "0", "0"], "draft": ["0", "0", "1"]}, "never overlap"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_malformed_file_names_the_file_and_the_field(
    tmp_path: Path, content: object, message: str
) -> None:
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(ScenarioFileError, match=message) as caught:
        load_scenario_file(path, "verifier")
    assert str(caught.value).startswith(path)


def test_the_command_audits_the_file_and_reports_each_failure_where_it_arose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = _write(tmp_path, "p.json", PAIR)
    exact = ["--exact", "--search", "0", "--quiet", "--scenario-file", pair]
    assert main(["audit", "specdec:verify_tokens", *exact]) == ExitCode.LOSSLESS
    assert "pair" in capsys.readouterr().out
    bug = "specdec.testing.zoo:resample_from_target"  # negative control: the same file
    assert main(["audit", bug, *exact]) == ExitCode.LOSSY

    bad = _write(tmp_path, "bad.json", {**PAIR, "k": "two"})
    assert main(["audit", "specdec:verify_tokens", "--scenario-file", bad]) == 2
    assert f"{bad}: scenarios[0].k: expected an integer" in capsys.readouterr().err

    boom = _write(tmp_path, "boom.py", "def scenarios():\n    raise ValueError('mine')\n")
    assert main(["audit", "specdec:verify_tokens", "--scenario-file", boom]) == ExitCode.CRASH
    captured = capsys.readouterr()
    assert f"the scenario file (--scenario-file) {boom} crashed" in captured.err
    assert "specdec:verify_tokens crashed" not in captured.err + captured.out
    assert "ValueError: mine" in captured.out

    with mock.patch(
        "specdec.testing.audit.scenarios.scenario_file.scenarios_from_data",
        side_effect=KeyError("ours"),
    ):
        code = main(["audit", "specdec:verify_tokens", "--scenario-file", pair, "--quiet"])
    assert code == ExitCode.INTERNAL_ERROR
    assert "specdec failed reading the scenario file" in capsys.readouterr().err

    stream = ["--stream", "--target", "x:y", "--prompts", "1", "--scenario-file", pair]
    assert main(["audit", "x:y", *stream]) == ExitCode.USAGE_ERROR
    assert "--stream takes none of --scenario-file" in capsys.readouterr().err


def test_a_greedy_scenario_whose_first_draft_is_always_rejected_is_accepted(
    tmp_path: Path,
) -> None:
    """At temperature 0 a draft whose argmax is not the target's is rejected at the first
    position every time: a legitimate greedy test (of the correction token), loaded and run
    (the reference step LOSSLESS on it). The control: at temperature 1, rows that never
    overlap are still refused (no draft is ever accepted)."""
    greedy = {"name": "greedy-reject-first", "target": ["3/4", "1/4", "0"],
              "draft": ["0", "1/4", "3/4"], "k": 2, "temperature": 0}  # fmt: skip
    (scenario,) = load_scenario_file(_write(tmp_path, "g.json", greedy), "step")
    report = audit_step(
        zoo.reference_step, scenarios=[scenario], samples=300, min_power_tv=1.0, coverage=False
    )
    assert report.lossless and report.scenarios[0].samples == 300, report.format()
    disjoint = {"target": ["1", "0"], "draft": ["0", "1"], "temperature": 1}
    with pytest.raises(ScenarioFileError, match="never overlap"):
        load_scenario_file(_write(tmp_path, "d.json", disjoint), "step")
