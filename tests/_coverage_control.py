"""A small function whose lines and branch arcs are counted by hand (``test_audit_coverage``).

Its line numbers are part of the test: edit this file and the expected arcs move with it.
"""


def control(x: int, ys: list[int]) -> int:
    total = 0  # line 8
    for y in ys:  # line 9: branch arcs 9 -> 10 (a value), 9 -> 14 (done)
        if y > x and y < 10:  # line 10: 10 -> 11 (true), 10 -> 12 (false)
            total += y  # line 11
        elif y == x:  # line 12: 12 -> 13 (true), 12 -> 9 (false: next value)
            continue  # line 13
    while total > 100:  # line 14: 14 -> 15 (enter), 14 -> 16 (leave)
        total -= 1  # line 15
    return total if total else -1  # line 16: one line, both ways: not a branch here
