"""Drafts made from the target itself: a cheaper copy of the same Hugging Face causal LM.

Without a model hub, the only pretrained draft for the packaged SmolLM2 is a degraded copy of
SmolLM2. Four degradations trade agreement with the target (the greedy acceptance rate ``α`` per
drafted token) for speed (the cost ratio ``c = T_draft / T_target`` of one token); their
measured ``α`` and ``c`` on SmolLM2-135M-Instruct, from ``benchmarks/bench_generate.py``, are in
``benchmarks/README.md``:

=========================  ==============================================================
draft                      why it is cheaper (or is not)
=========================  ==============================================================
``bfloat16_copy``          half the bytes per weight, but torch's bf16 matmul on one row
                           can be slower than float32 on a CPU
``int8_dynamic_copy``      int8 weights, activations quantised per call
``truncated_copy(m, 12)``  12 of 30 decoder layers
``int8_weight_copy``       int8 weights (a quarter of the bytes), bf16 activations, torch's
                           fused int8 matmul kernel
=========================  ==============================================================

A draft with no weights at all is ``specdec.models.NGramDraft`` (prompt lookup).

Every function returns a new model in eval mode and never touches the target (its parameters,
buffers, config and generation config). By default the new model is a deep copy; weight tying
survives it (``copy.deepcopy`` keeps shared parameters shared). With ``share_weights=True``
the draft reuses the target's own tensors where it needs the same values, so it adds little
memory: ``truncated_copy`` then copies no weight at all (the draft *is* the target's first
layers, embeddings, final norm and head; 1.0x the target's weights instead of 1 + n/L), and
``int8_dynamic_copy`` shares the float32 embeddings and head (on SmolLM2-135M those are 21% of
the weights, 113 MB) instead of copying them. Shared tensors are read-only in inference; a
caller who trains or edits one model changes the other.
"""

import copy
import warnings
from typing import TypeVar

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from specdec._checks import check_bool, check_instance, check_int_range
from specdec.models.int8_weights import Int8Embedding, Int8Linear, quantise_rows

__all__ = ["bfloat16_copy", "int8_dynamic_copy", "int8_weight_copy", "truncated_copy"]


_A_MODEL = "a transformers PreTrainedModel"  # what every function's ``model`` must be
_Module = TypeVar("_Module", bound=nn.Module)


def _fresh_copy(
    model: PreTrainedModel, keep: tuple[nn.Parameter, ...] = (), skip: tuple[nn.Module, ...] = ()
) -> PreTrainedModel:
    """A deep copy in eval mode; the parameters in ``keep`` are shared, not copied, and so are
    the modules in ``skip`` (the caller drops them from the copy: nothing is copied for them)."""
    shared: tuple[object, ...] = (*keep, *skip)
    clone = copy.deepcopy(model, memo={id(item): item for item in shared})
    clone.eval()  # type: ignore[no-untyped-call]
    return clone


def _embedding_parameters(model: PreTrainedModel) -> tuple[nn.Parameter, ...]:
    """The input embeddings' and the language-model head's weights (one if tied)."""
    found: list[nn.Parameter] = []
    for getter in (model.get_input_embeddings, model.get_output_embeddings):
        module = getter()
        weight = getattr(module, "weight", None)
        if isinstance(weight, nn.Parameter) and all(weight is not f for f in found):
            found.append(weight)
    return tuple(found)


def _shallow(module: _Module) -> _Module:
    """A new module object over the same parameters, buffers and child modules.

    Every container in the module's ``__dict__`` (``_modules``, ``_parameters``, ``_buffers``,
    the hook dictionaries) is copied, so replacing a child or registering a hook on either
    object leaves the other unchanged; the tensors and children themselves are shared.
    """
    clone = copy.copy(module)
    for name, value in vars(module).items():
        if isinstance(value, dict | set | list):
            clone.__dict__[name] = copy.copy(value)
    return clone


def bfloat16_copy(model: PreTrainedModel) -> PreTrainedModel:
    """A deep copy of ``model`` with every floating-point parameter and buffer in bfloat16.

    The copy's logits come back in bfloat16; ``specdec.warp_probs`` computes in float64, so
    the draft's sampling rows are exact functions of those logits.

    Args:
        model: a transformers causal LM (any dtype). Left unchanged.

    Returns:
        A new model in eval mode whose ``dtype`` is ``torch.bfloat16``.

    Raises:
        TypeError: ``model`` is not a ``PreTrainedModel``.

    Example:
        >>> import torch
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
        >>> target = LlamaForCausalLM(config)
        >>> draft = bfloat16_copy(target)
        >>> draft.dtype, target.dtype
        (torch.bfloat16, torch.float32)
    """
    clone = _fresh_copy(check_instance("model", model, PreTrainedModel, _A_MODEL))
    nn.Module.to(clone, dtype=torch.bfloat16)  # in place on the copy (modules cast in place)
    return clone


def int8_dynamic_copy(model: PreTrainedModel, *, share_weights: bool = False) -> PreTrainedModel:
    """A deep copy of ``model`` with its ``nn.Linear`` layers dynamically quantised to int8.

    ``torch.ao.quantization.quantize_dynamic`` replaces every ``nn.Linear`` *inside the
    decoder* with a dynamic ``qint8`` linear layer: weights stored as int8 with one scale per
    tensor, activations quantised on the fly at each call. Embeddings, norms and the language
    model head stay in floating point: the head stays a plain ``nn.Linear`` so the copy's
    ``get_output_embeddings().weight`` (the vocabulary size ``HFModel`` reads) and its tie to
    the input embeddings keep working. The deprecation warnings ``torch.ao.quantization``
    raises in recent torch releases are silenced inside this call only.

    The activations of a call are quantised with one scale for the whole input tensor, so a
    row's draft law depends on the other rows of its batch (and on batch size: the
    acceptance of a batched run is not that of its rows run alone). Verification stays
    lossless (the rule reads the very rows the tokens were sampled from, and equal inputs in
    one call get equal rows, as draft paths need); only speed moves.

    Args:
        model: a float32 transformers causal LM. Left unchanged.
        share_weights: reuse the target's input-embedding and head tensors (the only large
            float weights the copy keeps) instead of copying them.

    Returns:
        A new model in eval mode (CPU only: dynamic quantised kernels are CPU kernels).

    Raises:
        TypeError: ``model`` is not a ``PreTrainedModel``.
        ValueError: ``model`` is not float32 (dynamic quantisation reads float32 weights).

    Example:
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
        >>> draft = int8_dynamic_copy(LlamaForCausalLM(config))
        >>> draft.model.layers[0].mlp.down_proj.weight().dtype, draft.lm_head.weight.dtype
        (torch.qint8, torch.float32)
    """
    check_instance("model", model, PreTrainedModel, _A_MODEL)
    check_bool("share_weights", share_weights)
    clone = _fresh_copy(model, _embedding_parameters(model) if share_weights else ())
    if clone.dtype != torch.float32:
        raise ValueError(
            f"model must be float32 for int8 dynamic quantisation, got {clone.dtype}; "
            "quantise the float32 target, not a reduced-precision copy."
        )
    head = clone.get_output_embeddings()  # type: ignore[no-untyped-call]
    spec = {
        name
        for name, module in clone.named_modules()
        if isinstance(module, nn.Linear) and module is not head
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantize = torch.ao.quantization.quantize_dynamic
        quantize(clone, spec, dtype=torch.qint8, inplace=True)  # type: ignore[no-untyped-call]
    return clone


def _int8_layer(module: nn.Module) -> bool:
    """Whether ``int8_weight_copy`` replaces ``module`` by an int8 layer."""
    return isinstance(module, nn.Linear | Conv1D) or type(module) is nn.Embedding


def _replaced_weights(model: PreTrainedModel) -> tuple[nn.Parameter, ...]:
    """The weights of the layers ``int8_weight_copy`` replaces that nothing else in ``model``
    registers: the copy drops them, so it shares them (they are read, never written) instead
    of copying them first."""
    weights = {
        id(module.weight): module.weight
        for module in model.modules()
        if _int8_layer(module) and isinstance(module.weight, nn.Parameter)
    }
    for module in model.modules():
        owned = (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False))
        for name, tensor in owned:
            if not (_int8_layer(module) and name == "weight"):
                weights.pop(id(tensor), None)
    return tuple(weights.values())


def int8_weight_copy(model: PreTrainedModel) -> PreTrainedModel:
    r"""A copy of ``model`` with int8 weights (one scale per output row) and bfloat16 activations.

    Every ``nn.Linear`` (the language-model head included), every transformers ``Conv1D``
    (GPT-2's linear layers, weight stored ``[in, out]``) and every plain ``nn.Embedding``
    becomes an ``Int8Linear`` / ``Int8Embedding`` whose int8 matrix is quantised from the
    model's own weights read in float32:

    .. math::
        s_r = \max_c |W_{rc}| / 127, \qquad Q_{rc} = \mathrm{round}(W_{rc} / s_r), \qquad
        y = (x Q^\top) \odot s + b

    A weight tied between embedding and head is quantised once and shared by both layers.
    Everything else (norms, biases, scaled-embedding subclasses such as Gemma's, buffers) is
    cast to bfloat16, so the copy computes in bfloat16 throughout and its logits come back in
    bfloat16 (``specdec.warp_probs`` computes in float64). On a CPU, where a one-token forward
    pass is bound by memory bandwidth, this reads a quarter of a float32 model's weight bytes;
    unlike ``int8_dynamic_copy`` no activation is quantised, so it agrees with the target far
    more often and costs less per call (measured in ``benchmarks/README.md``).
    The copy adds about 1 byte per weight (SmolLM2-135M: 129 MiB against 257 MiB for
    ``bfloat16_copy``).

    Args:
        model: a floating-point transformers causal LM. Left unchanged.

    Returns:
        A new model in eval mode (the int8 matrix products use torch's CPU kernel
        ``_weight_int8pack_mm`` where the input width is a multiple of 16, and a dequantising
        product elsewhere).

    Raises:
        TypeError: ``model`` is not a ``PreTrainedModel``.
        ValueError: ``model`` is not floating point, or a weight is not finite.

    Example:
        >>> import torch
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> config = LlamaConfig(vocab_size=16, hidden_size=16, intermediate_size=32,
        ...     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
        >>> draft = int8_weight_copy(LlamaForCausalLM(config))
        >>> draft.lm_head.weight.dtype, draft.model.norm.weight.dtype
        (torch.int8, torch.bfloat16)

    References:
        ``proofs/theory.md`` claim 2 (lossless for any draft law: the rounding changes the
        acceptance rate, never the output law).
    """
    check_instance("model", model, PreTrainedModel, _A_MODEL)
    clone = _fresh_copy(model, _replaced_weights(model))
    if not clone.dtype.is_floating_point:
        raise ValueError(f"model must be floating point to be quantised, got {clone.dtype}.")
    dtype = torch.bfloat16
    done: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(weight) -> (Q, s), for ties

    def quantised(weight: torch.Tensor, transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
        if id(weight) not in done:
            done[id(weight)] = quantise_rows(weight.t() if transposed else weight)
        return done[id(weight)]

    for parent in list(clone.modules()):
        for name, child in list(parent.named_children()):
            replacement: nn.Module | None = None
            if isinstance(child, nn.Linear | Conv1D):
                matrix, scales = quantised(child.weight, isinstance(child, Conv1D))
                replacement = Int8Linear(matrix, scales, child.bias, dtype)
            elif type(child) is nn.Embedding:
                replacement = Int8Embedding(*quantised(child.weight, False), dtype)
            if replacement is not None:
                parent._modules[name] = replacement
    nn.Module.to(clone, dtype=dtype)  # the rest: norms and any float buffer, on the copy only
    return clone


def _decoder_layers(model: PreTrainedModel) -> tuple[nn.Module, str, nn.ModuleList]:
    """The module holding the decoder layers, the attribute name and the layer list."""
    count = model.config.num_hidden_layers
    for module in model.modules():
        for attribute in ("layers", "h", "blocks"):
            layers = getattr(module, attribute, None)
            if isinstance(layers, nn.ModuleList) and len(layers) == count:
                return module, attribute, layers
    raise ValueError(
        f"{type(model).__name__} has no ModuleList of {count} decoder layers under an attribute "
        "'layers', 'h' or 'blocks'; truncated_copy cannot find where to cut."
    )


def truncated_copy(
    model: PreTrainedModel, num_layers: int, *, share_weights: bool = False
) -> PreTrainedModel:
    """A copy of ``model`` keeping only its first ``num_layers`` decoder layers.

    The embeddings, the final norm and the language-model head are kept, so the copy is an
    "early exit" of the target after ``num_layers`` layers. ``config.num_hidden_layers`` is
    set to ``num_layers`` and, where the config lists per-layer attention types
    (``config.layer_types``: sliding or full attention), that list is cut to match.

    Args:
        model: a transformers causal LM whose decoder layers form one ``nn.ModuleList`` (Llama,
            Qwen2, Gemma: ``model.model.layers``; GPT-2: ``model.transformer.h``). Left unchanged.
        num_layers: how many layers to keep, ``1 <= num_layers <= config.num_hidden_layers``.
        share_weights: build the draft over the target's own modules (no weight copied: new
            module objects only on the path from the root to the layer list, a new config and
            generation config) instead of a deep copy. Its layers keep their ``layer_idx``
            ``0 .. num_layers - 1``, so its caches are its own.

    Returns:
        A new model in eval mode with ``num_layers`` decoder layers.

    Raises:
        TypeError: ``model`` is not a ``PreTrainedModel``, or ``num_layers`` is not an int.
        ValueError: ``num_layers`` out of range, or no decoder-layer list found.

    Example:
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16,
        ...     num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1)
        >>> draft = truncated_copy(LlamaForCausalLM(config), 1)
        >>> draft.config.num_hidden_layers, len(draft.model.layers)
        (1, 1)
    """
    check_instance("model", model, PreTrainedModel, _A_MODEL)
    total = model.config.num_hidden_layers
    check_int_range("num_layers", num_layers, 1, total, high_is="the model's decoder layers")
    check_bool("share_weights", share_weights)
    parent, _, original = _decoder_layers(model)  # fail before copying on an unknown layout
    if share_weights:
        clone = _shared_structure(model, parent)
    else:  # the layers past num_layers are dropped below: not copied first
        clone = _fresh_copy(model, skip=tuple(original[num_layers:]))
    parent, attribute, layers = _decoder_layers(clone)
    parent._modules[attribute] = nn.ModuleList(list(layers)[:num_layers])
    clone.config.num_hidden_layers = num_layers
    layer_types = getattr(clone.config, "layer_types", None)
    if isinstance(layer_types, list):
        clone.config.layer_types = layer_types[:num_layers]
    return clone


def _shared_structure(model: PreTrainedModel, parent: nn.Module) -> PreTrainedModel:
    """New module objects from the root down to ``parent`` (the layer list's holder), all else
    shared; the new modules get one new config (a deep copy) wherever the old ones held the
    target's, and the root a new generation config."""
    path = next(name for name, module in model.named_modules() if module is parent)
    root = _shallow(model)
    copied: list[nn.Module] = [root]  # the root, then each module on the path to ``parent``
    for name in path.split(".") if path else []:
        copied.append(_shallow(copied[-1].get_submodule(name)))
        copied[-2]._modules[name] = copied[-1]
    config = copy.deepcopy(model.config)
    for module in copied:
        if getattr(module, "config", None) is model.config:
            module.__dict__["config"] = config
    root.__dict__["generation_config"] = copy.deepcopy(model.generation_config)
    root.eval()  # type: ignore[no-untyped-call]
    return root
