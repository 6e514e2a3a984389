"""The benchmark programs (``python benchmarks/NAME.py --help``) and their private helpers.

Each program is a module with ``main(argv)``; importing one does no work. Timings are reported,
never asserted; the numbers measured on a given machine live in ``benchmarks/README.md``.
"""

__all__: list[str] = []
