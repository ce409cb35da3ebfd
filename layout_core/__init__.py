"""Workload-aware block layouts for Spark SQL over Parquet.

Only `layout_core.spark` (and the job entry points that call it) import
pyspark; the optimizers, router, catalog and CLI parsing run and are tested
without a JVM. `spark_sql`, `LaidOutTables` and `register_layouts` (from
`layout_core.spark.query`) are loaded on first use, for the same reason.
"""

from layout_core.base.version import __version__

_SPARK_API = ("spark_sql", "LaidOutTables", "register_layouts")
__all__ = ["__version__", *_SPARK_API]


def __getattr__(name: str):
    if name in _SPARK_API:
        # pyspark only when a Spark user asks for it: `import layout_core` stays light
        from layout_core.spark import query

        return getattr(query, name)
    raise AttributeError(f"module 'layout_core' has no attribute {name!r}")
