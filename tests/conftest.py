"""Hypothesis profiles for the whole suite.

``default``: 60 random examples per property, no deadline (CPU timings vary).
``ci``: the same, derandomized, so a CI run is reproducible; selected when ``CI`` is set.
"""

import os

from hypothesis import settings

settings.register_profile("default", max_examples=60, deadline=None)
settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")
