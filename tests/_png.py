"""PNG checks shared by the picture tests (``test_plots``, ``test_pictures``): a file's
signature and IHDR size, and the skip where matplotlib is missing."""

import importlib.util
import struct
from pathlib import Path

import pytest

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="matplotlib is not installed (pip install 'specdec[plot]')",
)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, after checking its signature and first chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert len(data) > 5_000, f"{path} is only {len(data)} bytes"
    return width, height
