"""A ``CausalLM`` wrapper that records its forward calls: how many, and how wide."""

from typing import Any

from specdec.models.base import CausalLM


class CountingLM:
    """Forwards to ``model``; ``widths`` holds the new tokens each call read."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.widths: list[int] = []

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    @property
    def calls(self) -> int:
        """Forward calls made."""
        return len(self.widths)

    @property
    def positions(self) -> int:
        """New positions read, over all calls."""
        return sum(self.widths)

    def forward(self, *args: Any) -> Any:
        self.widths.append(int(args[0].shape[1]))
        return self.model.forward(*args)
