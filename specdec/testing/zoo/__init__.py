"""A zoo of speculative-decoding verifiers and steps: known bugs and lossless controls.

Each entry reproduces one bug family seen in engines' issue trackers or in public
implementations (or is a lossless control written differently from the reference), at the level
where the bug lives: the verifier, or the whole step with its drafting and warping. Each is
written once, under ``@ZOO.register(family=..., lossy=..., ...)`` (``_registry``), which records
its metadata (``Entry``) and derives the other forms. Its docstring names the bug family and how
it shows up in the completed-block law: the emitted block completed to ``k+1`` tokens by sampling
the target, which for a lossless entry is exactly the target's joint law (``proofs/theory.md``,
claim 2).

Views, all derived from ``ZOO``:

* ``zoo.<name>``: the entry's batched form, marked ``@batched``, with the audit's signatures
  (``specdec.testing.signatures``); its randomness comes only from the ``generator`` argument,
  through ``specdec.noise.uniforms``.
* ``LOSSLESS_VERIFIERS`` / ``LOSSLESS_STEPS``: an audit must call them lossless.
* ``LOSSY_VERIFIERS`` / ``LOSSY_STEPS``: an audit must call them lossy (given scenarios where the
  bug can show; see each docstring).
* ``SUBOPTIMAL``: names of lossless entries that waste acceptance.
* ``VERIFIER_RULES`` and ``rule(name)``: the rules of explicit uniforms (``VerifyRule``), for the
  exact-law engine ``specdec.exact.block_law``.
* ``MULTI_ZOO``: multi-draft (one position) and tree rules, lossless controls and known bugs,
  each with the candidate draw it is judged on (a registry of its own: their argument lists
  differ from ``VerifyRule``).
* ``COUPLING_ZOO``: batched verifiers and steps whose bug couples the rows of a batch (a
  shared generator stream, a per-batch temperature, a shared draft scale, seeded rows drawing
  from the unseeded rows' stream), each lossless alone, and their controls; what
  ``audit(..., invariance=True)`` must say of each (a registry of its own: two take per-row
  ``generators``).
* ``VECTORISED_ZOO``: thresholds inside torch ops (``q.clamp_min(1e-4)``, ``where(mass <
  1e-3, ...)``, ``q + 1e-6``), four bugs below any sampling audit's power and their lossless
  twins, judged on the small-mass scenarios (a registry of its own, ``_vectorised``).
* ``STRING_ZOO``: string-level steps (a draft with another tokenizer, claim 22), lossless
  controls and known mistakes, each an exact law judged by ``audit_string_entry``.
* ``reference_verifier_single`` and ``reference_step_single``: the references with the
  single-sequence signatures (every entry has one: ``ZOO[name].single``).

An adapter of transformers' verifier lives in ``specdec.testing.transformers_adapter``.

Example:
    >>> from specdec.testing import zoo
    >>> len(zoo.LOSSY_VERIFIERS) + len(zoo.LOSSY_STEPS) >= 19
    True
    >>> sorted(zoo.SUBOPTIMAL)
    ['always_reject', 'exact_match', 'exact_match_step', 'no_bonus']
    >>> entry = zoo.ZOO["resample_from_target"]
    >>> entry.family, entry.level, entry.lossy, zoo.resample_from_target is entry.batched
    ('residual', 'verifier', True, True)
"""

from specdec.testing.zoo._coupling import COUPLING_ZOO, CouplingEntry, CouplingRegistry
from specdec.testing.zoo._draft_law import COARSE_GRID
from specdec.testing.zoo._multi_draft import MULTI_ZOO, MultiDraftEntry, MultiDraftRegistry
from specdec.testing.zoo._randomness import UNIFORM_BITS
from specdec.testing.zoo._registry import ZOO, BatchedFn, Entry, ExactTV, Family, Level, Registry
from specdec.testing.zoo._small_mass import SMALL_MASS

# string-level steps (a draft with another tokenizer; claim 22): a registry of their own
from specdec.testing.zoo._strings import (
    STRING_ZOO,
    StringAuditResult,
    StringEntry,
    audit_string_entry,
)
from specdec.testing.zoo._vectorised import VECTORISED_ZOO
from specdec.testing.zoo._views import (
    LOSSLESS_STEPS,
    LOSSLESS_VERIFIERS,
    LOSSY_STEPS,
    LOSSY_VERIFIERS,
    SUBOPTIMAL,
    VERIFIER_RULES,
    reference_step_single,
    reference_verifier_single,
    rule,
)

__all__ = [  # the names above, then every entry's name
    "COARSE_GRID",
    "COUPLING_ZOO",
    "LOSSLESS_STEPS",
    "LOSSLESS_VERIFIERS",
    "LOSSY_STEPS",
    "LOSSY_VERIFIERS",
    "MULTI_ZOO",
    "SMALL_MASS",
    "SUBOPTIMAL",
    "UNIFORM_BITS",
    "VECTORISED_ZOO",
    "VERIFIER_RULES",
    "ZOO",
    "CouplingEntry",
    "CouplingRegistry",
    "Entry",
    "ExactTV",
    "Family",
    "Level",
    "MultiDraftEntry",
    "MultiDraftRegistry",
    "Registry",
    "reference_step_single",
    "reference_verifier_single",
    "rule",
    # string-level steps (claim 22)
    "STRING_ZOO",
    "StringAuditResult",
    "StringEntry",
    "audit_string_entry",
    *ZOO,
]


def __getattr__(name: str) -> BatchedFn:
    """``zoo.<entry name>``: the entry's batched form (``ZOO[name].batched``)."""
    if name in ZOO:
        return ZOO[name].batched
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(ZOO))
