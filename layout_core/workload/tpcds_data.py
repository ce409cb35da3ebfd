"""TPC-DS tables as Parquet, made by dsdgen: DuckDB's tpcds extension, loaded from the
`duckdb-ext-tpcds` wheel's file (no download). That wheel is built for one DuckDB
release: pyproject pins both, and the error below says so when they disagree."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from layout_core.base.errors import ToolError, UserError

# store_sales ... web_site: every table of the specification
TABLES = ("call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
          "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
          "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
          "web_page", "web_returns", "web_sales", "web_site")
MARKER = "_tpcds_scale_factor"
# dsdgen hangs below 0.008 here (0.002 and 0.005 never returned) and builds every table
# in memory: SF 1 takes about 40 s and 3 GB, SF 10 ten times that.
SCALE_FACTORS = (0.01, 10.0)


def tpcds_extension() -> Path:
    """The dsdgen extension file of the installed DuckDB release."""
    import duckdb  # only when TPC-DS is generated: the CLI imports this module to build its parser

    spec = importlib.util.find_spec("duckdb_ext")
    folders = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    found = [f for folder in folders
             for f in sorted(Path(folder).glob(f"extensions/v{duckdb.__version__}/*/tpcds.duckdb_extension"))]
    if not found:
        raise ToolError(f"no TPC-DS extension for duckdb {duckdb.__version__}: pip install duckdb-ext-tpcds "
                        "with the duckdb release it was built for (pyproject pins both)")
    return found[0]


def generate_tpcds(scale_factor: float, out: str | Path) -> dict[str, Path]:
    """Write the 24 tables as `<out>/<table>.parquet`; returns their paths.

    Idempotent: a folder made at the same scale factor is kept (dsdgen is
    deterministic). Otherwise the tables are written to a staging folder beside
    `out` which then replaces it whole, so a failed run leaves nothing half-written.
    """
    import duckdb  # only when TPC-DS is generated: the CLI imports this module to build its parser

    low, high = SCALE_FACTORS
    if not low <= scale_factor <= high:
        raise UserError(f"TPC-DS scale factor must be in [{low:g}, {high:g}], not {scale_factor:g}: "
                        "dsdgen hangs below that range and generates in memory")
    out = Path(out)
    paths = {t: out / f"{t}.parquet" for t in TABLES}
    marker = out / MARKER
    if marker.exists() and marker.read_text().strip() == repr(float(scale_factor)) \
            and all(p.exists() for p in paths.values()):
        return paths
    extension = tpcds_extension()
    staging = out.with_name(f".{out.name}.writing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    con = duckdb.connect()
    try:
        con.load_extension(str(extension))
        con.execute("SET enable_progress_bar = false")
        try:
            con.execute(f"CALL dsdgen(sf={float(scale_factor)!r})")
        except duckdb.Error as e:
            raise ToolError(f"dsdgen failed at scale factor {scale_factor:g}: {str(e).splitlines()[0]}") from None
        for table in TABLES:
            con.execute(f"COPY {table} TO '{staging / (table + '.parquet')}' (FORMAT parquet)")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        con.close()
    (staging / MARKER).write_text(repr(float(scale_factor)))
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return paths
