"""Screenshots without another package: Xvfb's framebuffer file (XWD, ``-fbdir``) → a PNG.

Xvfb keeps its screen in a memory-mapped XWD file when started with ``-fbdir``; reading it costs
nothing in the X server, and NumPy plus zlib write the PNG (guimem's dependencies already).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from guimem.errors import EnvError
from guimem.types import Bounds

_HEADER = struct.Struct(">25I")


def read_xwd(path: Path) -> np.ndarray:
    """The screen in ``path`` (a 24-bit TrueColor XWD file, as Xvfb writes it) as an RGB array.

    Raises:
        EnvError: The file is missing or not the XWD layout Xvfb writes.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EnvError(f"cannot read the display's framebuffer: {exc.strerror}") from exc
    fields = _HEADER.unpack_from(data)
    header_size, version, bpp, line, ncolors = fields[0], fields[1], fields[11], fields[12], fields[19]
    width, height, byte_order = fields[4], fields[5], fields[7]
    if version != 7 or bpp != 32:
        raise EnvError(f"unexpected framebuffer layout (XWD version {version}, {bpp} bits per pixel)")
    start = header_size + 12 * ncolors
    pixels = np.frombuffer(data, dtype=np.uint8, count=line * height, offset=start).reshape(height, line)
    quads = pixels[:, : width * 4].reshape(height, width, 4)
    # LSBFirst (0): B, G, R, pad in memory
    rgb = quads[:, :, [2, 1, 0]] if byte_order == 0 else quads[:, :, [1, 2, 3]]
    return np.ascontiguousarray(rgb)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png_bytes(rgb: np.ndarray) -> bytes:
    """An RGB array as a PNG file."""
    height, width, _ = rgb.shape
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + _chunk(b"IEND", b""))


def save_screenshot(framebuffer: Path, target: Path, crop: Bounds | None = None) -> Path:
    """Write the display's screen (cropped to ``crop`` when it is on the screen) to ``target`` as a PNG."""
    rgb = read_xwd(framebuffer)
    if crop is not None and crop.w > 0 and crop.h > 0:
        x0, y0 = max(int(crop.x), 0), max(int(crop.y), 0)
        rgb = rgb[y0: y0 + int(crop.h), x0: x0 + int(crop.w)]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(png_bytes(rgb))
    return target
