"""A rendered figure's physical size written into its file, so every program that places it
(LaTeX, a word processor, an image viewer) puts it at the intended width:

- SVG: the root element's width and height in inches (the viewBox keeps the CSS pixels);
- PDF: the page box exactly ``width_in`` x 72 pt (Chromium quantises a CSS page size that is
  not a whole number of pixels, e.g. 7.2 in -> 517.92 pt instead of 518.4 pt; 2.42 in -> 174);
- PNG: a ``pHYs`` chunk with the resolution (without one, programs assume 72 or 96 dpi and
  place a 300 dpi figure at three to four times its width).
"""

from __future__ import annotations

import re
import struct
import zlib

PX_PER_IN = 96  # CSS pixels per inch; Chromium prints 96 px as 1 in (72 pt)
_PT_PER_PX = 72 / PX_PER_IN
_M_PER_IN = 0.0254


def sized(data: bytes, fmt: str, w_px: float, h_px: float, dpi: int) -> bytes:
    """``data`` (a figure rendered on a ``w_px`` x ``h_px`` CSS-pixel page) with its physical
    size recorded in the format's own way."""
    if fmt == "svg":
        return svg_in_inches(data, w_px, h_px)
    if fmt == "pdf":
        return pdf_page_box(data, w_px * _PT_PER_PX, h_px * _PT_PER_PX)
    if fmt == "png":
        return png_with_dpi(data, dpi)
    return data


def svg_in_inches(data: bytes, w_px: float, h_px: float) -> bytes:
    """The root element's size in inches (the viewBox keeps the CSS pixels), so programs that
    read SVG place it at its physical size whatever pixel density they assume."""
    text = data.decode()
    head, sep, rest = text.partition(">")
    w, h = w_px / PX_PER_IN, h_px / PX_PER_IN
    head = re.sub(r'\bwidth="[^"]*"', f'width="{w:.4f}in"', head, count=1)
    head = re.sub(r'\bheight="[^"]*"', f'height="{h:.4f}in"', head, count=1)
    return (head + sep + rest).encode()


_BOX = re.compile(rb"/(MediaBox|CropBox|TrimBox|BleedBox|ArtBox)\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]")
_XREF = re.compile(rb"xref\n(\d+) (\d+)\n((?:\d{10} \d{5} [nf] ?\r?\n)+)trailer")


def _number(x: float) -> bytes:
    return f"{x:.4f}".rstrip("0").rstrip(".").encode()


def pdf_page_box(data: bytes, w_pt: float, h_pt: float) -> bytes:
    """The page's boxes set to ``w_pt`` x ``h_pt`` (a box already within 0.01 pt is kept). The
    cross-reference table is rewritten to the objects' new offsets. Only the single-page,
    single-xref-table PDFs Chromium writes are changed; anything else is returned as it was."""
    if data.count(b"/MediaBox") != 1 or data.count(b"startxref") != 1:
        return data
    xref = _XREF.search(data)
    if xref is None or data.count(b"\nxref\n") != 1:
        return data
    edits = []  # (start, end, new bytes), in file order, all before the xref table
    for m in _BOX.finditer(data):
        for group, target in ((2, w_pt), (3, h_pt)):
            if abs(float(m.group(group)) - target) > 0.01:
                edits.append((m.start(group), m.end(group), _number(target)))
    if not edits or edits[-1][1] > xref.start():
        return data
    out, last = bytearray(), 0
    for a, b, new in edits:
        out += data[last:a] + new
        last = b
    body = bytes(out + data[last:xref.start()])

    def moved(offset: int) -> int:
        return offset + sum(len(new) - (b - a) for a, b, new in edits if a < offset)

    lines = xref.group(3).splitlines(keepends=True)
    table = b"".join(b"%010d%s" % (moved(int(line[:10])), line[10:]) if line[17:18] == b"n" else line
                     for line in lines)
    head = b"xref\n" + xref.group(1) + b" " + xref.group(2) + b"\n"
    tail = data[xref.end() - len(b"trailer"):]
    start_at = tail.index(b"startxref")
    number = re.match(rb"startxref\s+(\d+)", tail[start_at:])
    if number is None or int(number.group(1)) != xref.start():
        return data
    tail = tail[:start_at] + b"startxref\n%d" % len(body) + tail[start_at + number.end():]
    return body + head + table + tail


def png_with_dpi(data: bytes, dpi: int) -> bytes:
    """``data`` with a ``pHYs`` chunk (pixels per metre, both axes) right after ``IHDR``; an
    existing ``pHYs`` is replaced."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return data
    ppm = round(dpi / _M_PER_IN)
    body = b"pHYs" + struct.pack(">IIB", ppm, ppm, 1)
    chunk = struct.pack(">I", 9) + body + struct.pack(">I", zlib.crc32(body))
    chunks, i = [], 8
    while i + 8 <= len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        end = i + 12 + n
        if data[i + 4:i + 8] != b"pHYs":
            chunks.append(data[i:end])
        i = end
    return data[:8] + chunks[0] + chunk + b"".join(chunks[1:])
