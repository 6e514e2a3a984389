"""The one base of specdec's torch dispatch modes (the capture's supply, the threshold and
dtype recorders): ``TorchDispatchMode`` without torch.compile's guard.

By default torch wraps every mode's ``__torch_dispatch__`` to keep torch.compile out of it,
which imports ``torch._dynamo`` at the mode's first call (seconds, once per process). Nothing
specdec runs inside its modes is compiled, so the guard buys nothing here.
"""

from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DispatchMode"]


class DispatchMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """``TorchDispatchMode`` whose ``__torch_dispatch__`` is not wrapped for torch.compile."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """``False``: no ``torch._dynamo`` import at the first call (module docstring)."""
        return False
