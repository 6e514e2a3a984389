"""The values a ``specdec.supply.Supply`` hands out: a per-row cursor over a given vector.

``Supply`` (the dispatch mode) decides *which* random op gets values and how they become the
op's result; this tape decides *which values* it gets: the next ``count / rows`` of each row,
``1/2`` past those given (with ``extend``), a refusal past ``limit``. The race tracker
(``specdec.races``) takes its one uniform per race row from the same tape and gives back the
values of the clocks a race consumed (``rewind``), so both read and move one cursor, and
neither writes into the other.

With ``deferred`` (races followed), the limit and the values given are checked when the call
ends (``finish``) instead of when they are passed, since a race may give values back.

Example:
    >>> import torch
    >>> tape = ValueTape(torch.tensor([0.25, 0.75], dtype=torch.float64))
    >>> tape.take(1).tolist(), tape.used
    ([0.25], 1)
    >>> tape.rewind(0)
    >>> tape.take(2).tolist(), tape.used
    ([0.25, 0.75], 2)
"""

import torch
from torch import Tensor

__all__ = ["LazyClocksUsed", "NotEnumerableError", "ValueTape"]


class NotEnumerableError(RuntimeError):
    """The function used randomness the capture cannot feed (or a varying amount of it)."""


class LazyClocksUsed(NotEnumerableError):  # noqa: N818 (a request, not an error)
    """Exponential clocks fed without values (``specdec.supply.Supply(lazy_clocks=True)``)
    were used other than in a race: the caller runs the call again with values for them."""


class ValueTape:
    """The cursor over ``values`` (``None``: record, feeding ``1/2``), ``rows`` rows of it.

    Attributes:
        values: ``[rows, given]`` float64 values, or ``None``.
        rows: the batch's rows: each random op's leading dimension is the batch.
        limit: the most values a call may take per row (``None``: no limit).
        extend: past the given values, feed ``1/2`` (counted in ``used``) instead of refusing.
        deferred: the limit and the given values checked in ``finish`` (a race may rewind).
        used: the values taken per row.
        refusal: the last refusal (code between the op and the caller may re-raise it as
            something else, so the caller asks the tape whether one happened).
        layout: a refusal was a random op whose leading dimension is not the batch.
        over: with ``deferred``: the limit was passed (checked in ``finish``).
    """

    def __init__(
        self,
        values: Tensor | None,
        rows: int = 1,
        *,
        limit: int | None = None,
        extend: bool = False,
        deferred: bool = False,
    ) -> None:
        self.values = None if values is None else values.reshape(rows, -1)
        self.rows = rows
        self.limit = limit
        self.extend = extend
        self.deferred = deferred
        self.used = 0
        self.refusal: NotEnumerableError | None = None
        self.layout = False
        self.over: str | None = None

    def refuse(self, message: str, *, layout: bool = False) -> NotEnumerableError:
        """Record a refusal (``refusal``) and return the error to raise."""
        self.refusal = NotEnumerableError(message)
        self.layout = self.layout or layout
        return self.refusal

    def take(self, count: int) -> Tensor:
        """``count`` values in the op's row-major order: with ``rows`` rows, the op's leading
        dimension is the batch, and each row takes its next ``count / rows`` values. Past the
        given values: ``1/2`` when ``extend`` (counted in ``used``), else a refusal."""
        if count % self.rows:
            raise self.refuse(
                f"a random op drew {count} values for {self.rows} rows: its leading dimension "
                "is not the batch",
                layout=True,
            )
        per_row = count // self.rows
        if self.limit is not None and self.used + per_row > self.limit and self.deferred:
            self.over = (  # a race may give the values back (``rewind``): checked at the end
                f"the function draws more than {self.limit} random values per call; the exact "
                f"engine enumerates at most {self.limit}"
            )
        elif self.limit is not None and self.used + per_row > self.limit:
            raise self.refuse(
                f"the function draws more than {self.limit} random values per call; the exact "
                f"engine enumerates at most {self.limit}"
            )
        given = 0 if self.values is None else self.values.shape[1]
        if (
            self.values is not None
            and self.used + per_row > given
            and not self.extend
            and not self.deferred  # with races: checked in ``finish`` (a race may rewind)
        ):
            raise self.refuse(
                f"the function drew more than the {given} random values per row "
                "it drew when recorded: the amount of randomness depends on its inputs"
            )
        out = torch.full((self.rows, per_row), 0.5, dtype=torch.float64)
        if self.values is not None:
            supplied = self.values[:, self.used : self.used + per_row]
            out[:, : supplied.shape[1]] = supplied
        self.used += per_row
        return out.reshape(-1)

    def rewind(self, start: int) -> None:
        """Give back the values taken from ``start`` on (a race consumed the source that took
        them: ``specdec.races``)."""
        self.used = start

    def finish(self) -> None:
        """After the call: a limit passed and not given back is refused, and so are values
        past those given (without ``extend``)."""
        if self.over is not None and self.limit is not None and self.used > self.limit:
            raise self.refuse(self.over)
        given = None if self.values is None else self.values.shape[1]
        if given is not None and self.used > given and not self.extend:
            raise self.refuse(
                f"the function drew more than the {given} random values per row "
                "it drew when recorded: the amount of randomness depends on its inputs"
            )
