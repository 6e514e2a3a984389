"""A ``CausalLM`` wrapper that counts its forward calls and the positions they read."""

from typing import Any

from specdec.models.base import CausalLM


class CountingLM:
    """Forwards to ``model``; ``calls`` and ``positions`` (new tokens read) count its use."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.calls = 0
        self.positions = 0

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    def forward(self, *args: Any) -> Any:
        self.calls += 1
        self.positions += int(args[0].shape[1])
        return self.model.forward(*args)
