"""``specdec --help`` and ``import specdec`` load neither transformers nor any model.

Each check runs in a fresh interpreter (this test process has loaded transformers already),
and its negative control, ``from specdec.models import HFModel``, must load transformers, so
the check can fail.
"""

import subprocess
import sys

import pytest

PROBE = """
import sys
{statement}
print("transformers" in sys.modules)
"""
HELP = "from specdec.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"


def _loads_transformers(statement: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(statement=statement)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize(
    "statement",
    [
        "import specdec",
        "import specdec.models",
        "from specdec.models import ToyLM, NGramDraft, MappedDraft",
        HELP.format(argv=["--help"]),
        HELP.format(argv=["audit", "--help"]),
    ],
)
def test_light_imports_do_not_load_transformers(statement: str) -> None:
    assert not _loads_transformers(statement)


def test_the_probe_sees_transformers_when_a_wrapper_is_used() -> None:
    assert _loads_transformers("from specdec.models import HFModel")
