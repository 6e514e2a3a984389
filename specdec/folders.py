"""Where ``specdec prove`` and ``specdec bench`` find their scripts: one explicit lookup.

The proofs (``proofs/claim_NN_*.py``) and the benchmarks (``benchmarks/bench_*.py``) live in a
checkout of specdec, and a wheel or an sdist ships a copy of each inside the package, as
``specdec/_shipped/proofs`` and ``specdec/_shipped/benchmarks`` (``pyproject.toml``).
``locate_folder`` says which folder a command uses, in this order, the first source that is
*given* deciding:

1. an explicit folder (a function's ``folder`` argument);
2. an environment variable (``SPECDEC_PROOFS``, ``SPECDEC_BENCHMARKS``);
3. the checkout beside the package: ``<parent of specdec/>/proofs`` (or ``benchmarks``), which
   exists when specdec is run from a checkout or installed from one in editable mode;
4. else, when specdec is not in a checkout (no ``pyproject.toml`` beside ``specdec/``), the copy
   installed with the package (``SHIPPED``), where it is one.

A given source that is not a folder is reported, not passed over for the next one: a typo in
``SPECDEC_PROOFS`` must not silently run another checkout's proofs. When nothing is found,
``FolderLookup.missing`` says where it looked and how to point at a folder.

Example:
    >>> lookup = locate_folder("proofs", "SPECDEC_PROOFS", "/no/such/folder")
    >>> lookup.folder is None, lookup.source
    (True, 'the folder given')
    >>> message = lookup.missing("specdec prove", "claim_*.py scripts")
    >>> print(message)  # doctest: +NORMALIZE_WHITESPACE
    specdec prove: no proofs folder at /no/such/folder (the folder given). Point at one with
    SPECDEC_PROOFS=DIR (a folder of claim_*.py scripts), run specdec from a checkout, or install
    it from a wheel or an sdist, which ship them.
"""

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PACKAGE_PARENT", "SHIPPED", "FolderLookup", "checkout_root", "locate_folder"]

PACKAGE_PARENT = Path(__file__).resolve().parents[1]
"""The folder holding ``specdec/``: a checkout's root when specdec runs from one."""

SHIPPED = Path(__file__).resolve().parent / "_shipped"
"""Where an installed wheel or sdist keeps its copies of ``proofs/`` and ``benchmarks/``."""


@dataclass(frozen=True)
class FolderLookup:
    """Where a command looked for its folder, and what it found.

    Attributes:
        name: the folder's role (``"proofs"``, ``"benchmarks"``).
        variable: the environment variable that points at it.
        looked_at: the path checked.
        source: where that path came from (``"the folder given"``, ``"SPECDEC_PROOFS"``, ``"the
            checkout beside the package"``, ``"the copy installed with the package"``).
        folder: ``looked_at`` when it is a folder, else ``None``.
    """

    name: str
    variable: str
    looked_at: Path
    source: str
    folder: Path | None

    def missing(self, command: str, holds: str) -> str:
        """The message for a missing folder: where ``command`` looked and how to point at one
        that ``holds`` what it needs."""
        return (
            f"{command}: no {self.name} folder at {self.looked_at} ({self.source}). Point at one "
            f"with {self.variable}=DIR (a folder of {holds}), run specdec from a checkout, or "
            "install it from a wheel or an sdist, which ship them."
        )


def locate_folder(name: str, variable: str, folder: str | Path | None = None) -> FolderLookup:
    """The folder ``name`` from ``folder``, else the environment variable ``variable``, else
    the checkout beside the package, else the copy installed with it (the first one given
    decides; see the module docstring).

    Args:
        name: the folder's name in a checkout (``"proofs"``, ``"benchmarks"``).
        variable: the environment variable that may point at it.
        folder: an explicit folder, which wins over the others.

    Returns:
        A ``FolderLookup``; its ``folder`` is ``None`` when the chosen path is not a folder.
    """
    if folder is not None:
        path, source = Path(folder), "the folder given"
    elif os.environ.get(variable):
        path, source = Path(os.environ[variable]), variable
    elif (SHIPPED / name).is_dir() and not (PACKAGE_PARENT / "pyproject.toml").is_file():
        path, source = SHIPPED / name, "the copy installed with the package"
    else:
        path, source = PACKAGE_PARENT / name, "the checkout beside the package"
    path = path.expanduser().resolve()
    return FolderLookup(name, variable, path, source, path if path.is_dir() else None)


def checkout_root() -> Path | None:
    """The checkout holding ``proofs/`` and ``benchmarks/`` beside ``specdec/``, if any (the
    environment variables are not consulted; ``locate_folder`` does that)."""
    return PACKAGE_PARENT if (PACKAGE_PARENT / "proofs").is_dir() else None
