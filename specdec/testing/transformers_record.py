"""transformers' assisted generation, recorded step by step (issue 42's engine step record).

``transformers_stream.transformers_trace(model, prompts, generations=N, max_new_tokens=n,
generator=g, options=law, assistant_model=draft)`` runs ``generate`` ``N`` times per prompt through
``transformers_stream_sampler`` and returns a ``Trace`` (``specdec.testing.step_record``):
per generation, one ``StepRecord`` per verification step, which the trace judge (``audit``
with the trace, ``specdec audit --trace FILE`` after ``save_trace``) holds to the exact law of
the declared rule given the recorded rows.

Where the record comes from: ``_assisted_decoding`` asks its candidate generator, each step,

    candidate_ids, candidate_logits = candidate_generator.get_candidates(input_ids, ...)
    ... the target's forward, its logits processors (the warping) into new_logits,
    ... the rule (``_speculative_sampling`` when sampling with candidate logits; an exact
    ... match against the target's own sample or argmax otherwise), the EOS and length crop,
    candidate_generator.update_candidate_strategy(input_ids, new_logits, n_matches)

``recording_steps`` wraps, for the duration of one ``generate`` call, the target's
``_get_candidate_generator`` *as looked up at entry* (an instance attribute shadowing the
class's method, removed on exit) so that the generator it builds has its two methods wrapped:
``get_candidates`` gives the step's start (``input_ids``' length), the drafted tokens and the
candidate logits; ``update_candidate_strategy`` gives the target rows the rule verified with
(the processed ``new_logits``) and the sequence after the step, whose new part is what the
step emitted. Everything between runs as transformers (or a user's patch of it: a replaced
``_speculative_sampling``, a candidate generator returning other logits) has it, so what is
recorded is what ran. Rows are the float64 softmax of those logits (``record_step`` reduces
them to scalars on the spot).

The step as recorded:

* ``drafted``: the candidates (``k`` may vary: the draft length is capped by the tokens left,
  and ``k = 0`` when one token is left: a plain sample from the target row);
* ``draft_probs``: softmax of the candidate logits; a candidate generator without logits
  (prompt lookup) proposes a fixed token, its row one-hot, which makes transformers' "sample
  from ``p``, keep while equal" the token-level rule exactly;
* ``target_probs``: softmax of the processed ``new_logits`` (``k + 1`` rows, the last the
  bonus row);
* ``emitted``: the tokens the step appended. transformers cuts a step's block after its
  first EOS, so a block cut after an accepted draft that is EOS is a *cut* step (accepted
  drafts only, ``StepRecord.ending == "cut"``); an EOS correction or bonus ends a step as
  usual. Generation stops there: the EOS step is each sequence's last;
* ``position``: the step's start minus the prompt's length (its offset in the new tokens);
* ``rule``: ``"token"`` when sampling, ``"greedy"`` at temperature 0 (``do_sample=False``).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from specdec.testing.step_record import StepRecord, record_step

__all__ = ["recording_steps"]

_HOOK = "_get_candidate_generator"


def _rows(logits: Tensor) -> Tensor:
    """``[k, V]`` float64 softmax of one sequence's ``[1, k, V]`` logits."""
    return torch.softmax(logits[0].to(torch.float64), dim=-1)


def _instrument(
    candidates: Any, prompt_length: int, rule: str, sink: Callable[[StepRecord], None]
) -> None:
    """Wrap ``candidates``' ``get_candidates`` and ``update_candidate_strategy`` (instance
    attributes) so that each step's record goes to ``sink``."""
    get_candidates = candidates.get_candidates
    update = candidates.update_candidate_strategy
    drafts: dict[str, Any] = {}  # the step under way: its start, candidates and their logits

    def recorded_get_candidates(input_ids: Tensor, *args: Any, **kwargs: Any) -> Any:
        candidate_ids, candidate_logits = get_candidates(input_ids, *args, **kwargs)
        drafts.update(start=input_ids.shape[-1], ids=candidate_ids, logits=candidate_logits)
        return candidate_ids, candidate_logits

    def recorded_update(input_ids: Tensor, scores: Tensor, num_matches: Any) -> Any:
        start = drafts["start"]
        target_probs = _rows(scores)  # [k+1, V], the rows the rule verified with
        drafted = drafts["ids"][0, start:].to(target_probs.device)  # [k]
        if drafts["logits"] is not None:
            draft_probs = _rows(drafts["logits"].to(target_probs.device))
        else:  # a proposed token, not a sampled one: its row is one-hot
            width = target_probs.shape[-1]
            draft_probs = torch.nn.functional.one_hot(drafted, width).to(torch.float64)
        emitted = input_ids[0, start:].to(target_probs.device)  # after the EOS/length crop
        sink(
            record_step(
                drafted, emitted, draft_probs, target_probs, rule=rule,
                position=start - prompt_length,
            )
        )  # fmt: skip
        return update(input_ids, scores, num_matches)

    candidates.get_candidates = recorded_get_candidates
    candidates.update_candidate_strategy = recorded_update


@contextmanager
def recording_steps(
    model: Any, prompt_length: int, rule: str, sink: Callable[[StepRecord], None]
) -> Iterator[None]:
    """Within: each verification step of ``model.generate``'s assisted decoding goes to ``sink``.

    The model's ``_get_candidate_generator`` is looked up on entry (a user's patch is kept and
    used) and shadowed by an instance attribute that instruments the generator it returns
    (module notes); the instance is restored on exit, whatever happened.

    Args:
        model: the target, a transformers causal LM.
        prompt_length: ``L``, the prompt's length (a step's position is its start minus ``L``).
        rule: ``"token"`` or ``"greedy"`` (``StepRecord.rule``).
        sink: called with each step's ``StepRecord``, in order.
    """
    shadowed = model.__dict__.get(_HOOK)
    build = getattr(model, _HOOK)

    def instrumented(*args: Any, **kwargs: Any) -> Any:
        candidates = build(*args, **kwargs)
        _instrument(candidates, prompt_length, rule, sink)
        return candidates

    model.__dict__[_HOOK] = instrumented
    try:
        yield
    finally:
        if shadowed is None:
            del model.__dict__[_HOOK]
        else:
            model.__dict__[_HOOK] = shadowed
