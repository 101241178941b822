"""What saving the stack's text vectors after a round writes, and how long it takes: the whole table rewritten (as
every save did before segments) against the segmented save (`VectorTable.save`: the loaded rows linked, the
round's new rows written), in one run, on the same table.

The table holds ``--rows`` random 384-dimensional vectors (the stack holds one per item text: about as many as
items), saved once and loaded, as after an open from the index cache; then each of ``--rounds`` rounds adds
``--new`` rows and saves into a fresh folder, as `StackMemory._save_cache` does after a round. Every save is
fsynced in both arms, so the disk's work is counted (the stack does not fsync: where the page cache absorbs the
writes, the old save's wall time is less than the figure here, its bytes are not); the rows copied are read from
files just written (a hot page cache). Printed: ms and MB written per save, p50 over the rounds, both ways, and
the ratio; the segments held at the end.

Usage: python benchmarks/text_vectors_save.py [--rows 1000000] [--new 1000] [--rounds 8] [--dir /tmp] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from guimem.vectors.table import VectorTable

DIM = 384


def _vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def _written(folder: Path, before: set[int]) -> int:
    """Bytes of the files in ``folder`` that are not links to files already on disk (``before``: their inodes)."""
    total = 0
    for file in folder.iterdir():
        st = file.stat()
        if st.st_ino not in before:
            total += st.st_size
    return total


def _fsync(folder: Path) -> None:
    for file in folder.iterdir():
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _inodes(folder: Path) -> set[int]:
    return {f.stat().st_ino for f in folder.iterdir()}


def run(rows: int, new: int, rounds: int, where: Path) -> dict[str, float]:
    base = where / "base"
    table = VectorTable(DIM, spill_dir=where)
    for start in range(0, rows, 65536):
        n = min(65536, rows - start)
        table.add([f"t{start + i}" for i in range(n)], _vectors(n, start))
    table.save(base)
    _fsync(base)
    table.load(base)
    whole_ms, whole_mb, seg_ms, seg_mb = [], [], [], []
    current = base
    for r in range(rounds):
        table.add([f"r{r}-{i}" for i in range(new)], _vectors(new, rows + r))
        # the whole table rewritten, as before segments: every loaded segment copied, then the new rows
        full = where / f"full-{r}"
        full.mkdir()
        t = time.perf_counter()
        table._write(full, 0, list(table._segments), added=True)
        _fsync(full)
        whole_ms.append((time.perf_counter() - t) * 1000)
        whole_mb.append(_written(full, set()) / 2**20)
        shutil.rmtree(full)
        # the segmented save
        seg = where / f"seg-{r}"
        before = _inodes(current)
        t = time.perf_counter()
        table.save(seg)
        _fsync(seg)
        seg_ms.append((time.perf_counter() - t) * 1000)
        seg_mb.append(_written(seg, before) / 2**20)
        table.load(seg)
        if current != base:
            shutil.rmtree(current)
        current = seg
    out = {"rows": rows, "new_per_round": new, "rounds": rounds,
           "whole_ms_p50": statistics.median(whole_ms), "whole_mb_p50": statistics.median(whole_mb),
           "segmented_ms_p50": statistics.median(seg_ms), "segmented_mb_p50": statistics.median(seg_mb),
           "segmented_mb_max": max(seg_mb), "segments_at_end": table.segments}
    out["time_ratio"] = out["whole_ms_p50"] / out["segmented_ms_p50"]
    out["bytes_ratio"] = out["whole_mb_p50"] / out["segmented_mb_p50"]
    table.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="text vectors held (about one per item)")
    parser.add_argument("--new", type=int, default=1000, help="text vectors a round adds")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=None, help="where the tables are written (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="guimem-save-bench-") as tmp:
        out = run(args.rows, args.new, args.rounds, Path(tmp))
    print(f"{out['rows']:,} text vectors, {out['new_per_round']:,} new a round, {out['rounds']} rounds (p50 per save):")
    print(f"  whole table rewritten: {out['whole_ms_p50']:8.1f} ms  {out['whole_mb_p50']:8.1f} MB written")
    print(f"  segmented save:        {out['segmented_ms_p50']:8.1f} ms  {out['segmented_mb_p50']:8.1f} MB written "
          f"(at most {out['segmented_mb_max']:.1f} MB; {out['segments_at_end']} segments at the end)")
    print(f"  ratio: {out['time_ratio']:.1f}x faster, {out['bytes_ratio']:.0f}x fewer bytes")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
