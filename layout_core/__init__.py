"""Workload-aware block layouts for Spark SQL over Parquet.

Pure Python: nothing here imports pyspark at module top level, so the
optimizer, router and catalog run (and are tested) without a JVM.
"""

__version__ = "0.1.0"
