"""The report's coverage section as text: what ran of the audited function's own code, the
branch arcs and thresholds reached, what the searches added (``report_text`` prints it)."""

from specdec.testing.audit.scenarios.coverage import CodeCoverage

__all__ = ["UNREACHED_SHOWN", "coverage_lines"]

UNREACHED_SHOWN = 20
"""Branch arcs never reached that ``format`` lists (the JSON lists them all)."""


def coverage_lines(coverage: CodeCoverage | None) -> list[str]:
    """The report's coverage section: what ran of the function's own code, what the search
    added, the branch arcs never reached (``file:line -> line``) and the limits."""
    if coverage is None:
        return []
    lines = [
        "",
        f"  coverage: {coverage.line()}, in "
        f"{', '.join(coverage.files) or 'no file (nothing of it ran)'}",
        f"    measured on {coverage.probe}",
    ]
    if coverage.one_sided:
        lines.append(
            "    thresholds seen on one side only (a verdict says nothing about the other): "
            + ", ".join(coverage.one_sided)
        )
    if coverage.searched:
        derived = set(coverage.threshold_found)
        found = (
            ", ".join(n for n in coverage.found if n not in derived) or "none reached a new branch"
        )
        tried = coverage.searched
        lines.append(f"    coverage-guided search: {tried} candidate pairs tried, kept {found}")
    if coverage.threshold_searched:
        kept = ", ".join(coverage.threshold_found) or "none straddled a new threshold"
        lines.append(
            f"    threshold search: {coverage.threshold_searched} pairs derived from the "
            f"thresholds tried, kept {kept}"
        )
    shown = coverage.unreached[:UNREACHED_SHOWN]
    if shown:
        lines.append("    never reached (a verdict says nothing about these branches):")
        lines += [f"      {arc}" for arc in shown]
        if len(coverage.unreached) > len(shown):
            lines.append(f"      ... and {len(coverage.unreached) - len(shown)} more (--json)")
    lines.append(
        "    branches are Python branches across lines; thresholds are the constants the "
        "function's torch ops compared, clamped or selected on (specdec.testing.thresholds)"
    )
    lines.append(f"    measuring and searching took {coverage.seconds:.1f} s")
    return lines
