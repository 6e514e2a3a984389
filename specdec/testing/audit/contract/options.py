"""The audit's options: one frozen record, validated on construction, for every form and mode.

``AuditOptions`` holds everything a caller may choose about an audit: the mode (``exact``),
the power of the statistical mode (``samples`` or ``detect_tv``, ``min_power_tv``, the two
error rates), what counts in the verdict (``allow_nondeterministic``, ``blocks_span_steps``),
the seed and threads, and how an engine is handed its inputs (``reserved_ids``, ``dtype``,
``device``, ``ragged``, ``model_interface``, ``target_warp``, ``target_sampler``), and whether
rows are also run alone and in mixed batches (``invariance``), and a stream's own choices
(``stream``: a ``StreamOptions``). It is
checked once, when built, before the audited function is ever called: a wrong type is a
``TypeError``, a value out of range or two options that exclude each other a ``ValueError``
naming the option, what was expected and what was got.

Which options apply to which form (a sampler to a step, ``ragged`` to a batched verifier,
none of the sampling options to the exact mode...) is the subject's to say
(``specdec.testing.audit.contract.subject``); the public entry points take the options as keywords
(``AuditKeywords``) and build the record.

Example:
    >>> AuditOptions(detect_tv=0.05).detect_tv
    0.05
    >>> AuditOptions(samples=0)
    Traceback (most recent call last):
    ValueError: samples must be >= 1, got 0.
"""

import dataclasses
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

import torch
from torch import Tensor

from specdec._checks import check_finite, check_int, check_positive_int, check_rate
from specdec.testing.audit.contract.argument_types import checked_type
from specdec.testing.audit.contract.flags import flag, ids_of, loaded
from specdec.testing.audit.contract.scenario import WarpFn
from specdec.testing.audit.contract.stream_options import PositionKinds, StreamOptions
from specdec.testing.audit.contract.subject import SAMPLING_OPTIONS, Subject
from specdec.warp import SamplingOptions

__all__ = [
    "SAMPLING_OPTIONS",
    "SEARCHED_PAIRS",
    "STREAM_KEYWORDS",
    "AuditKeywords",
    "AuditOptions",
    "Progress",
    "SamplerFn",
    "StreamKeywords",
    "StreamOptions",
    "WarpFn",
    "check_audit_options",
]

Progress = Callable[[str], None]
"""Called with one line per finished scenario."""

SamplerFn = Callable[..., Tensor]
"""An engine's target-only sampler: ``sampler(logits [N, V], generator, *, temperature, top_k,
top_p) -> LongTensor [N]``."""

SEARCHED_PAIRS = 16
"""Searched toy pairs an exact verifier audit adds to its battery by default (``search``)."""

_DTYPES = ("float64", "float32", "bfloat16", "float16")
"""``--dtype``'s names (``conventions.DTYPES``)."""


def _distance(name: str, value: float) -> float:
    return check_rate(name, value, include_one=True)


class AuditKeywords(TypedDict, total=False):
    """The options as keyword arguments of the public audit functions (``AuditOptions``)."""

    exact: bool
    samples: int | None
    detect_tv: float | None
    min_power_tv: float | None
    false_fail_rate: float
    false_pass_rate: float
    seed: int
    num_threads: int | None
    allow_nondeterministic: bool
    blocks_span_steps: bool
    search: int
    reserved_ids: Sequence[int]
    dtype: torch.dtype | None
    device: str | torch.device | None
    ragged: bool
    model_interface: Literal["logits", "transformers"]
    target_warp: WarpFn | None
    target_sampler: SamplerFn | None
    adversarial: int
    coverage: bool
    workers: int
    executor: Executor | None
    checkpoint: str | os.PathLike[str] | None
    resume: str | os.PathLike[str] | None
    invariance: bool
    stream: StreamOptions


class StreamKeywords(AuditKeywords, total=False):
    """``audit_stream``'s keywords: the options, and a stream's own choices one by one
    (``StreamOptions``'s fields, ``STREAM_KEYWORDS``); ``options`` is the deprecated name of
    its ``law`` (a ``DeprecationWarning``; removed in the next release)."""

    mode: str
    reference: Callable[..., Any] | Subject | None
    position_kinds: PositionKinds | None
    eos_token_id: int | None
    options: SamplingOptions | None


STREAM_KEYWORDS = ("mode", "reference", "position_kinds", "eos_token_id")
"""The ``StreamOptions`` fields ``audit_stream`` takes as keywords."""


@dataclass(frozen=True)
class AuditOptions:
    """Everything a caller chooses about an audit, checked when built.

    Attributes:
        exact: the exact mode (the law from the function's own decisions, no sampling; it
            says ``cannot decide`` where the randomness cannot be enumerated) instead of the
            statistical one (the default, for every form).
        samples: (statistical) draws per scenario, fixed: the report states the power they
            bought; at most one of ``samples`` and ``detect_tv``.
        detect_tv: (statistical) size each scenario to detect a deviation of total variation
            ``>= detect_tv`` with false-pass rate ``false_pass_rate`` (default: 0.01 for a
            batched function or rule, 0.05 for a single-sequence one).
        min_power_tv: (statistical) a passing audit some of whose scenarios detect only a
            larger distance is ``inconclusive`` (default 0.05, or ``detect_tv`` when larger).
        false_fail_rate: (statistical) family-wise rate of calling a lossless function lossy.
        false_pass_rate: (statistical) per scenario, at the reported detectable distance.
        seed: everything the audit draws (or, exact, explores) derives from it.
        num_threads: torch intra-op threads while the audit runs (default 1: its tensors are
            small and on a shared machine torch's pool costs more than it saves; ``None``
            keeps torch's setting).
        allow_nondeterministic: judge the law alone when the same seed gives other blocks.
        blocks_span_steps: accept blocks above one step's optimum and judge the law alone.
        search: (exact, verifiers) seeded toy pairs added to the battery; also the
            coverage-guided search's budget (``8 * search`` candidates tried, at most
            ``search`` kept, each only when it reaches something new).
        reserved_ids: token ids the engine reserves: probability 0 in every toy row, an
            emitted one is an invalid output.
        dtype: the rows' (verifier) or logits' (step) dtype as the function gets them; with
            ``exact``, also the dtype the engine computes in: a law within its rounding bound
            (``specdec.discover.rounding_bound``) is "LOSSLESS up to <dtype> rounding".
        device: where rows, logits and the function's generator live (``"cuda"`` must exist).
        ragged: (batched verifier) each row drafts its own ``k_n``, told by ``num_drafts``.
        model_interface: (step) ``"logits"`` callables or ``"transformers"``-like models.
        target_warp: (step) the engine's warping: the target is its warped law.
        target_sampler: (step) the engine's target-only sampler: a two-sample test.
        adversarial: (statistical, verifiers) adversarial pairs added to the battery
            (``adversarial.adversarial_scenarios``: small residuals, near ties, sparse and
            one-hot rows); the command's ``--search N`` without ``--exact``.
        coverage: measure which branches of the function's own code the scenarios reach: for
            a verifier by a probe, with a search for pairs that reach the others (``search``
            sets the budget; ``specdec.testing.audit.scenarios.search``); for a step, a multi-draft
            or a tree rule during the audit's own calls (in this process and on the CPU only);
            ``False``: neither.
        workers: (statistical) draw the chunks on this many local processes (forked from a
            server that imported specdec once, ``shard.START_METHOD``; the function is
            imported by name in each, ``shard.function_reference``); the report is the same
            for any number (``specdec.testing.audit.running.shard``).
        executor: (statistical) draw the chunks on this ``concurrent.futures.Executor``
            instead (a Dask ``client.get_executor()``, say); not with ``workers > 1``.
        checkpoint: (statistical) write the merged evidence to this JSON file after each
            chunk, atomically (``specdec.testing.audit.running.checkpoint``).
        resume: (statistical) continue from this checkpoint (it must be this audit's) and
            keep checkpointing to it unless ``checkpoint`` names another file.
        invariance: (batched verifier, rule, batched step) also run each scenario's rows alone
            and inside mixed batches, and say ``batch-dependent`` when a row's law (or a
            seeded row's output) changes with its batch
            (``specdec.testing.audit.judging.invariance``).
        stream: (streams) the stream audit's mode, reference, position kinds and EOS
            (``StreamOptions``; the default judges exact-law or large by ``V ** n``).

    Raises:
        TypeError: an option of the wrong type.
        ValueError: ``samples < 1``, a rate outside ``(0, 1)``, a distance outside ``(0, 1]``,
            both ``samples`` and ``detect_tv``, ``num_threads < 1``, ``search < 0``, a
            negative reserved id, an unknown ``model_interface``, both ``target_warp`` and
            ``target_sampler``, a sampling option with ``exact``, ``workers < 1``, both
            ``workers > 1`` and ``executor``.
    """

    exact: bool = field(default=False, metadata=flag(
        "--exact",
        "exact verdict from the rule's own decisions (a VerifyRule: uniforms in); says 'cannot "
        "decide' where its randomness cannot be enumerated",
    ))  # fmt: skip
    samples: int | None = field(default=None, metadata=flag(
        "--samples",
        "fixed samples per scenario (>= 1); the report states the power it bought (instead of "
        "--detect-tv)",
        group="power", type=checked_type(check_positive_int, int), exclusive="size",
    ))  # fmt: skip
    detect_tv: float | None = field(default=None, metadata=flag(
        "--detect-tv",
        "size each scenario to detect a deviation of total variation >= X with the false-pass "
        "rate (default 0.01 batched, 0.05 single-sequence: a single-sequence function is called "
        "once per sample, about 466,000 times over the verifier battery)",
        group="power", type=checked_type(_distance, float), metavar="X", exclusive="size",
    ))  # fmt: skip
    min_power_tv: float | None = field(default=None, metadata=flag(
        "--min-power-tv",
        "INCONCLUSIVE when a scenario cannot detect TV X (default 0.05, or --detect-tv when "
        "larger)",
        group="power", type=checked_type(_distance, float), metavar="X",
    ))  # fmt: skip
    false_fail_rate: float = field(default=1e-6, metadata=flag(
        "--false-fail-rate",
        "family-wise rate of calling a lossless function lossy, in (0, 1) (default 1e-6)",
        group="power", type=checked_type(check_rate, float),
    ))  # fmt: skip
    false_pass_rate: float = field(default=1e-3, metadata=flag(
        "--false-pass-rate",
        "rate of missing a deviation of the printed detectable TV, in (0, 1) (default 1e-3)",
        group="power", type=checked_type(check_rate, float),
    ))  # fmt: skip
    seed: int = field(default=0, metadata=flag("--seed", "seed of everything drawn", type=int))
    num_threads: int | None = 1
    allow_nondeterministic: bool = field(default=False, metadata=flag(
        "--allow-nondeterministic",
        "judge the law alone (a function drawing from torch's global RNG gives different blocks "
        "under one seed; its law is still tested)",
        group="power",
    ))  # fmt: skip
    blocks_span_steps: bool = field(default=False, metadata=flag(
        "--blocks-span-steps",
        "accept more tokens per call than any lossless single step emits on average (a loop "
        "returning k+1 tokens over several steps) and judge the law alone; without it such "
        "blocks are INVALID-OUTPUT (exit 5)",
        group="power",
    ))  # fmt: skip
    search: int = field(default=SEARCHED_PAIRS, metadata=flag(
        "--search",
        f"with --exact, N seeded small toy pairs join its battery, --scenarios or not (default "
        f"{SEARCHED_PAIRS}; 0: none); without --exact (verifiers), N adversarial pairs join the "
        "statistical battery: small residuals, near ties, sparse and one-hot rows (default "
        "none); also the coverage-guided search's budget on the default battery: 8 N "
        "candidate pairs tried, at most N kept, each only when it reaches a branch or line too "
        "few scenarios reached (it may keep none)",
        type=checked_type(lambda name, value: check_int(name, value, minimum=0), int),
    ))  # fmt: skip
    reserved_ids: tuple[int, ...] = field(default=(), metadata=flag(
        "--reserved-ids",
        "ID,... token ids the engine reserves (EOS...): probability 0 in every toy row, an "
        "emitted one is an invalid output",
        group="engine", type=str, convert=lambda text: ids_of(text, "--reserved-ids"),
    ))  # fmt: skip
    dtype: torch.dtype | None = field(default=None, metadata=flag(
        "--dtype",
        "dtype of the rows (verifier) or logits (step) the function gets (default float64); with "
        "--exact also the dtype the engine computes in: a law within its rounding bound is "
        "LOSSLESS up to that dtype's rounding",
        group="engine", type=str, choices=_DTYPES, convert=lambda name: getattr(torch, name),
    ))  # fmt: skip
    device: str | torch.device | None = field(default=None, metadata=flag(
        "--device", "cpu or cuda[:N] (an error where CUDA is absent)", group="engine", type=str
    ))  # fmt: skip
    ragged: bool = field(default=False, metadata=flag(
        "--ragged",
        "(--batched verifier) rows draft their own k_n in 1..k, told by the keyword num_drafts; "
        "padding -1 / zero rows (specdec.testing.audit.scenarios.ragged)",
        group="engine",
    ))  # fmt: skip
    model_interface: Literal["logits", "transformers"] = field(default="logits", metadata=flag(
        "--model-interface",
        "(--step) hand the step plain logits callables (default) or transformers-like models: "
        "model(input_ids, cache=..., use_cache=...).logits, .config",
        group="engine", type=str, choices=("logits", "transformers"),
    ))  # fmt: skip
    target_warp: WarpFn | None = field(default=None, metadata=flag(
        "--target-warp",
        "(--step) MODULE:FUNCTION, the engine's warp(logits, *, temperature, top_k, top_p) -> "
        "probs: the verdict is about verification given it; the report says how far it is from "
        "specdec's warping",
        group="engine", type=str, convert=loaded("--target-warp"),
    ))  # fmt: skip
    target_sampler: SamplerFn | None = field(default=None, metadata=flag(
        "--target-sampler",
        "(--step) MODULE:FUNCTION, the engine's sampler(logits, generator, *, temperature, "
        "top_k, top_p) -> tokens: a two-sample test against its own target law (sized by "
        "--detect-tv with the two-sample formula: about 4x the samples, for both samples)",
        group="engine", type=str, convert=loaded("--target-sampler"),
    ))  # fmt: skip
    adversarial: int = 0
    coverage: bool = field(default=True, metadata=flag(
        "--no-coverage",
        "neither measure which branches of FUNCTION's own code the scenarios reach nor "
        "(verifiers) search pairs that reach the others (by default both: --search N sets the "
        "search's budget, 8 N candidates, at most N kept; steps, multi-draft and tree rules are "
        "measured during the audit's own calls, with no search)",
        negated=True,
    ))  # fmt: skip
    workers: int = field(default=1, metadata=flag(
        "--workers",
        "draw the chunks on N local processes (FUNCTION is imported by name in each); the same "
        "report as --workers 1 (default)",
        group="scale", type=checked_type(check_positive_int, int), metavar="N",
    ))  # fmt: skip
    executor: Executor | None = None
    checkpoint: str | os.PathLike[str] | None = field(default=None, metadata=flag(
        "--checkpoint",
        "write the merged counts and e-process state to FILE (JSON) after each chunk, "
        "atomically",
        group="scale", type=Path, metavar="FILE",
    ))  # fmt: skip
    resume: str | os.PathLike[str] | None = field(default=None, metadata=flag(
        "--resume",
        "continue from the checkpoint FILE (refused if another audit or version wrote it, or it "
        "was changed) and keep checkpointing to it: the same report as a run never interrupted",
        group="scale", type=Path, metavar="FILE",
    ))  # fmt: skip
    invariance: bool = field(default=False, metadata=flag(
        "--invariance",
        "also run each scenario's rows alone and inside mixed batches (other rows greedy or "
        "sampled, seeded or not, of another scenario; other batch sizes and positions) and exit "
        "9 BATCH-DEPENDENT when a row's law, or a seeded row's output for its seed, changes with "
        "its batch (exact where its random values or seed can be paired, else a two-sample "
        "test; batched verifiers, VerifyRules and batched steps)",
        group="power",
    ))  # fmt: skip
    stream: StreamOptions = field(default=StreamOptions())

    def __post_init__(self) -> None:
        check_audit_options(
            samples=self.samples,
            false_fail_rate=self.false_fail_rate,
            false_pass_rate=self.false_pass_rate,
            detect_tv=self.detect_tv,
            min_power_tv=self.min_power_tv,
            seed=self.seed,
            num_threads=self.num_threads,
        )
        check_int("search", self.search, minimum=0)
        check_int("adversarial", self.adversarial, minimum=0)
        ids = tuple(self.reserved_ids)
        for token in ids:
            check_int("reserved_ids", token, minimum=0)
        object.__setattr__(self, "reserved_ids", ids)
        if self.model_interface not in ("logits", "transformers"):
            raise ValueError(
                f"model_interface must be 'logits' or 'transformers', got {self.model_interface!r}."
            )
        if self.target_warp is not None and self.target_sampler is not None:
            raise ValueError("give target_warp or target_sampler, not both.")
        check_positive_int("workers", self.workers)
        if self.executor is not None and not isinstance(self.executor, Executor):
            raise TypeError(
                "executor must be a concurrent.futures.Executor, got "
                f"{type(self.executor).__name__}."
            )
        if self.executor is not None and self.workers > 1:
            raise ValueError(
                f"give workers ({self.workers}) or executor, not both: the executor's workers "
                "draw the chunks."
            )
        for name in ("checkpoint", "resume"):
            if getattr(self, name) is not None and not isinstance(
                getattr(self, name), (str, os.PathLike)
            ):
                raise TypeError(f"{name} must be a path, got {type(getattr(self, name)).__name__}.")
        if not isinstance(self.stream, StreamOptions):
            raise TypeError(f"stream must be a StreamOptions, got {type(self.stream).__name__}.")
        if self.invariance and self.ragged:
            raise ValueError("invariance=True mixes rows of one k; it takes no ragged=True.")
        if self.invariance and self.device is not None and str(self.device) != "cpu":
            raise ValueError(
                f"invariance=True runs rows on the CPU (its capture pairs CPU draws); got "
                f"device={self.device!r}: audit the device without invariance, or leave it out."
            )
        if self.exact and self.given(*SAMPLING_OPTIONS):
            given = ", ".join(self.given(*SAMPLING_OPTIONS))
            raise ValueError(
                f"exact=True takes none of {given}: sampling options do not apply (no sampling)."
            )

    @classmethod
    def of(cls, options: "AuditOptions | None" = None, **keywords: Any) -> "AuditOptions":
        """``options`` (default: the defaults) with ``keywords`` replaced, checked again.

        Raises:
            TypeError: a keyword that is not an option (the message lists them).
        """
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise TypeError(
                f"unknown audit option(s) {', '.join(unknown)}; the options are "
                f"{', '.join(sorted(names))}."
            )
        return dataclasses.replace(options or cls(), **keywords)

    def given(self, *names: str) -> tuple[str, ...]:
        """Which of ``names`` (all options when none) differ from their defaults."""
        fields = {field.name: field.default for field in dataclasses.fields(self)}
        return tuple(
            name for name in (names or tuple(fields)) if getattr(self, name) != fields[name]
        )


def check_audit_options(
    *,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    detect_tv: float | None = None,
    min_power_tv: float | None = None,
    seed: int = 0,
    num_threads: int | None = 1,
) -> None:
    """Validate the statistical options before anything runs (``AuditOptions`` calls it).

    Raises:
        TypeError: an option of the wrong type.
        ValueError: ``samples < 1``, a rate outside ``(0, 1)``, a distance outside ``(0, 1]``,
            both ``samples`` and ``detect_tv``, ``num_threads < 1``.

    Example:
        >>> check_audit_options(samples=0)
        Traceback (most recent call last):
        ValueError: samples must be >= 1, got 0.
    """
    if samples is not None:
        check_positive_int("samples", samples)
    check_rate("false_fail_rate", check_finite("false_fail_rate", false_fail_rate))
    check_rate("false_pass_rate", check_finite("false_pass_rate", false_pass_rate))
    for name, tv in (("detect_tv", detect_tv), ("min_power_tv", min_power_tv)):
        if tv is not None:
            check_rate(name, check_finite(name, tv), include_one=True)
    if samples is not None and detect_tv is not None:
        raise ValueError(
            f"give samples ({samples}) or detect_tv ({detect_tv}), not both: detect_tv chooses "
            "the sample size of each scenario."
        )
    check_int("seed", seed)
    if num_threads is not None:
        check_positive_int("num_threads", num_threads)
