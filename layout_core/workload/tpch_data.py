"""TPC-H tables as Parquet, made by the tpchgen-cli generator from PyPI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from layout_core.base.errors import ToolError

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def tpchgen_executable() -> str:
    """tpchgen-cli next to this Python (a virtualenv's bin) or on PATH."""
    beside = Path(sys.executable).with_name("tpchgen-cli")
    if beside.exists():
        return str(beside)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise ToolError("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return found


def generate_tpch(scale_factor: float, out: str | Path) -> dict[str, Path]:
    """Write the 8 tables as `<out>/<table>.parquet`; returns their paths.

    Idempotent: tables already made at the same scale factor are kept (the
    generator is deterministic); a different scale factor regenerates them.
    """
    if scale_factor <= 0:
        raise ValueError(f"scale factor must be positive, not {scale_factor}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {t: out / f"{t}.parquet" for t in TABLES}
    marker = out / "_tpch_scale_factor"
    if not marker.exists() or marker.read_text().strip() != repr(float(scale_factor)):
        for p in paths.values():
            p.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
    missing = [t for t, p in paths.items() if not p.exists()]
    if missing:
        subprocess.run(
            [tpchgen_executable(), "parquet", "-s", str(scale_factor), f"--output-dir={out}",
             f"--tables={','.join(missing)}", "-q"],
            check=True,
        )
    absent = [t for t, p in paths.items() if not p.exists()]
    if absent:
        raise ToolError(f"tpchgen-cli did not write {absent} under {out}")
    marker.write_text(repr(float(scale_factor)))
    return paths
