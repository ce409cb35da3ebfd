"""Workload-aware block layouts for Spark SQL over Parquet.

Only `layout_core.spark` (and the job entry points that call it) import
pyspark; the optimizers, router, catalog and CLI parsing run and are tested
without a JVM.
"""

__version__ = "0.1.0"
