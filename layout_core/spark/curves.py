"""Space-filling-curve layouts in Spark: the z-order / Hilbert baselines.

`with_curve_key(df, columns, kind, bits)` adds a bigint `_curve`; sorting by it
and cutting into equal-size blocks (`curve_block_index`) is what Delta
`OPTIMIZE ZORDER BY`, Iceberg `rewrite_data_files` (zorder sort) and Hudi
z-order / Hilbert clustering do.

Normalization of a column to a coordinate in [0, 2^bits)
--------------------------------------------------------
Ranks, not raw values, so that skewed columns spread over the whole range.
Each column gets a resolution of 2^r cells, r = min(bits, quantile_bits)
(default 10, i.e. 1024 cells per column, about Delta's 1000 range ids); the
cell number c in [0, 2^r) is shifted left by bits - r so that coordinates
always span [0, 2^bits). With quantiles q_j at probabilities j / 2^r
(j = 1 .. 2^r - 1), c(v) = #{j : q_j <= v}; with exact quantiles this is
`layout_core.algorithms.curves.rank_coordinates(values, r)`. NULLs (and NaN)
get coordinate 0.

* numeric, boolean, date, timestamp columns: an order-preserving double
  (dates as `unix_date` days, timestamps as `unix_micros`, decimals and longs
  cast to double, which is monotone though not injective beyond 2^53, ±inf
  clamped to the largest finite doubles so the splits stay strictly
  increasing); exact quantiles (`relative_error` 0, the default) from one
  `approxQuantile` pass over all such columns, on a row-hash sample of about
  `QUANTILE_SAMPLE_ROWS` rows when there are more: an approximate sketch
  (relative error > 0) depends on the rows' order and partitioning, so the
  same input gave different blocks from run to run; then `pyspark.ml.feature.Bucketizer`
  (JVM) with the distinct quantiles as splits gives b(v) = #{distinct q <= v}
  and a literal array lookup maps b to c = #{j : q_j <= v}, which keeps
  repeated quantiles (heavy hitters) from compressing the range.
* string and binary columns: a hash is not order preserving, so when the
  column has at most `max_distinct` (default 100 000) distinct values, they are
  collected with their counts, c(v) is computed exactly on the driver (UTF-8
  binary order, which is Spark's default collation and Python's code point
  order) and joined back with a broadcast join. Otherwise the first 6 bytes
  (UTF-8) as a big-endian 48-bit integer (exact in a double; strings padded with
  zero bytes, so a proper prefix sorts first) are bucketized like a numeric
  column: order preserving, but strings sharing their first 6 bytes tie.

The key itself is computed by a vectorized `pandas_udf` calling the numpy
functions of `layout_core.algorithms.curves` (no row-at-a-time Python UDF). It
equals the unsigned curve index when k * bits <= 63; when k * bits = 64 it is
index - 2^63 (the top bit flipped), so that signed bigint order is still
curve order.
"""

from __future__ import annotations

from typing import Sequence

from layout_core.base.names import BLOCK_INDEX_COLUMN
import numpy as np
import pandas as pd
from pyspark.ml.feature import Bucketizer
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout_core.algorithms.curves import hilbert_keys, zorder_keys

__all__ = [
    "BLOCK_INDEX_COLUMN",
    "CURVE_COLUMN",
    "curve_block_index",
    "curve_coordinate_columns",
    "with_curve_coordinates",
    "with_curve_key",
]

CURVE_COLUMN = "_curve"
KINDS = ("zorder", "hilbert")
MAX_BITS_PER_COLUMN = 62  # coordinates (< 2^bits) are stored in a bigint
_DOUBLE_MAX = float(np.finfo(np.float64).max)
_PREFIX_BYTES = 6  # 48 bits: exact in a double

_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)


QUANTILE_SAMPLE_ROWS = 1_000_000  # exact quantiles of at most about this many rows (a row-hash sample)
_SAMPLE_MODULUS = 1_000_000


def curve_coordinate_columns(k: int) -> list[str]:
    """Names of the coordinate columns added by `with_curve_coordinates`."""
    return [f"_coord{i}" for i in range(k)]


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _check(df: DataFrame, columns: Sequence[str], bits: int, quantile_bits: int) -> list[str]:
    columns = list(columns)
    if not columns:
        raise ValueError("columns must name at least one column")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"unknown columns {missing}; the DataFrame has {df.columns}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"duplicate columns in {columns}")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_BITS_PER_COLUMN:
        raise ValueError(f"bits must be an int in [1, {MAX_BITS_PER_COLUMN}], got {bits!r}")
    if len(columns) * bits > 64:
        raise ValueError(f"{len(columns)} columns * {bits} bits > 64; use bits <= {64 // len(columns)}")
    if isinstance(quantile_bits, bool) or not isinstance(quantile_bits, int) or not 1 <= quantile_bits <= 16:
        raise ValueError(f"quantile_bits must be an int in [1, 16], got {quantile_bits!r}")
    return columns


def _order_key(c: Column, dtype: T.DataType) -> Column:
    """A double column ordered like `c` (non-strictly); NULL for NULL and NaN."""
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        x = F.when(F.isnan(c), F.lit(None)).otherwise(c.cast("double"))
    elif isinstance(dtype, _NUMERIC):
        x = c.cast("double")
    elif isinstance(dtype, T.BooleanType):
        x = c.cast("int").cast("double")
    elif isinstance(dtype, T.DateType):
        x = F.unix_date(c).cast("double")
    elif isinstance(dtype, T.TimestampType):
        x = F.unix_micros(c).cast("double")
    elif isinstance(dtype, T.TimestampNTZType):
        x = F.unix_micros(c.cast("timestamp")).cast("double")
    elif isinstance(dtype, (T.StringType, T.BinaryType)):
        raw = F.encode(c, "UTF-8") if isinstance(dtype, T.StringType) else c
        hex_prefix = F.rpad(F.hex(F.substring(raw, 1, _PREFIX_BYTES)), 2 * _PREFIX_BYTES, "0")
        x = F.conv(hex_prefix, 16, 10).cast("long").cast("double")
    else:
        raise TypeError(f"cannot lay out by a column of type {dtype.simpleString()}")
    # (not least/greatest: those skip NULLs)
    return (F.when(x == F.lit(float("inf")), F.lit(_DOUBLE_MAX))
             .when(x == F.lit(float("-inf")), F.lit(-_DOUBLE_MAX))
             .otherwise(x))


def _cells_from_counts(cumulative: np.ndarray, total: int, r: int) -> np.ndarray:
    """c = min(floor(R * 2^r / m), 2^r - 1) for cumulative counts R (r <= 16: no overflow)."""
    return np.minimum((cumulative.astype(np.int64) << r) // total, (1 << r) - 1)


def with_curve_coordinates(
    df: DataFrame,
    columns: Sequence[str],
    bits: int = 16,
    *,
    quantile_bits: int = 10,
    relative_error: float = 0.0,
    max_distinct: int = 100_000,
) -> DataFrame:
    """`df` plus bigint columns `_coord0.._coord{k-1}` in [0, 2^bits) (see the module doc).

    Runs Spark jobs on the driver's behalf: one `approxQuantile` pass over the
    numeric/date/timestamp columns (and long strings), one distinct-count query
    per string or binary column.
    """
    columns = _check(df, columns, bits, quantile_bits)
    spark = df.sparkSession
    r = min(bits, quantile_bits)
    shift = bits - r
    dtypes = {f.name: f.dataType for f in df.schema.fields}
    out_names = curve_coordinate_columns(len(columns))
    clash = [c for c in out_names if c in df.columns]
    if clash:
        raise ValueError(f"the DataFrame already has columns {clash}")

    # 1. string / binary columns with few distinct values: exact cells, joined back.
    joined: dict[int, tuple[DataFrame, str, str]] = {}
    for i, name in enumerate(columns):
        dtype = dtypes[name]
        if not isinstance(dtype, (T.StringType, T.BinaryType)) or max_distinct <= 0:
            continue
        counts = (df.where(_col(name).isNotNull()).groupBy(_col(name).alias("v"))
                    .agg(F.count(F.lit(1)).alias("n")).limit(max_distinct + 1).collect())
        if len(counts) > max_distinct:
            continue
        values = [row["v"] for row in counts]
        order = sorted(range(len(values)), key=lambda j: values[j])  # str: code points = UTF-8 bytes
        n = np.array([counts[j]["n"] for j in order], dtype=np.int64)
        cells = _cells_from_counts(np.cumsum(n), int(n.sum()), r) if len(n) else np.zeros(0, np.int64)
        vcol, ccol = f"__lc_v{i}", f"__lc_c{i}"
        schema = T.StructType([T.StructField(vcol, dtype, False), T.StructField(ccol, T.LongType(), False)])
        mapping = spark.createDataFrame([(values[j], int(c) << shift) for j, c in zip(order, cells)], schema)
        joined[i] = (mapping, vcol, ccol)

    # 2. everything else: quantiles of an order-preserving double, then Bucketizer.
    quantiled = [i for i in range(len(columns)) if i not in joined]
    coords: dict[int, Column] = {}
    work = df
    if quantiled:
        key_names = [f"__lc_q{i}" for i in quantiled]
        work = work.select("*", *[_order_key(_col(columns[i]), dtypes[columns[i]]).alias(q)
                                  for i, q in zip(quantiled, key_names)])
        probabilities = [j / (1 << r) for j in range(1, 1 << r)]
        sample = work
        rows = work.count()
        if rows > QUANTILE_SAMPLE_ROWS:  # which rows: a hash of their values, not their position
            hashed = [_col(f.name) for f in df.schema.fields if not isinstance(f.dataType, T.MapType)]
            sample = work.where(F.pmod(F.xxhash64(*hashed), F.lit(_SAMPLE_MODULUS))
                                < F.lit(int(QUANTILE_SAMPLE_ROWS / rows * _SAMPLE_MODULUS)))
        quantiles = sample.approxQuantile(key_names, probabilities, relative_error)
        bucketize_in, bucketize_out, splits = [], [], []
        for i, q_name, q in zip(quantiled, key_names, quantiles):
            if not q:  # only NULLs (or no rows)
                coords[i] = F.lit(0).cast("long")
                continue
            q = np.asarray(q, dtype=np.float64)
            distinct, counts = np.unique(q, return_counts=True)
            lookup = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64) << shift  # bucket b -> cell
            b_name = f"__lc_b{i}"
            bucketize_in.append(q_name)
            bucketize_out.append(b_name)
            splits.append([float("-inf"), *map(float, distinct), float("inf")])
            bucket = F.least(_col(b_name).cast("int"), F.lit(len(distinct)))  # NULL rows fall in the 'keep' bucket
            if np.array_equal(lookup, np.arange(len(lookup), dtype=np.int64) << shift):
                cell = bucket.cast("long") * F.lit(1 << shift)
            else:
                # one SQL array literal (one py4j call, not one per element)
                table = F.expr("array(" + ", ".join(f"{int(x)}L" for x in lookup) + ")")
                cell = F.element_at(table, bucket + 1).cast("long")
            coords[i] = F.when(_col(q_name).isNull(), F.lit(0).cast("long")).otherwise(cell)
        if bucketize_in:
            work = work.select("*", *[F.coalesce(_col(q), F.lit(float("nan"))).alias(q + "_nan")
                                      for q in bucketize_in])
            work = Bucketizer(splitsArray=splits, inputCols=[q + "_nan" for q in bucketize_in],
                              outputCols=bucketize_out, handleInvalid="keep").transform(work)

    for i, (mapping, vcol, ccol) in joined.items():
        work = work.join(F.broadcast(mapping), _col(columns[i]) == _col(vcol), "left")
        coords[i] = F.coalesce(_col(ccol), F.lit(0).cast("long"))

    result = work.select(*[_col(c) for c in df.columns],
                         *[coords[i].alias(out_names[i]) for i in range(len(columns))])
    return result


def _key_udf(kind: str, bits: int, k: int):
    curve = zorder_keys if kind == "zorder" else hilbert_keys
    flip = k * bits == 64

    @F.pandas_udf(T.LongType())
    def curve_key(coords: pd.DataFrame) -> pd.Series:
        a = coords.to_numpy(dtype=np.int64).astype(np.uint64)
        key = curve(a, bits)
        if flip:
            key ^= np.uint64(1 << 63)
        return pd.Series(key.view(np.int64))

    return curve_key


def with_curve_key(
    df: DataFrame,
    columns: list[str],
    kind: str,
    bits: int = 16,
    *,
    quantile_bits: int = 10,
    relative_error: float = 0.0,
    max_distinct: int = 100_000,
    keep_coordinates: bool = False,
) -> DataFrame:
    """`df` plus a bigint `_curve`: the z-order or Hilbert index of the normalized `columns`.

    kind is 'zorder' or 'hilbert'; needs len(columns) * bits <= 64. With
    keep_coordinates the `_coord<i>` columns stay (see `with_curve_coordinates`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    columns = _check(df, columns, bits, quantile_bits)
    coord_names = curve_coordinate_columns(len(columns))
    clash = [c for c in [CURVE_COLUMN, *coord_names] if c in df.columns]
    if clash:
        raise ValueError(f"the DataFrame already has columns {clash}")
    with_coords = with_curve_coordinates(df, columns, bits, quantile_bits=quantile_bits,
                                         relative_error=relative_error, max_distinct=max_distinct)
    key = _key_udf(kind, bits, len(columns))(F.struct(*[_col(c) for c in coord_names]))
    out = with_coords.withColumn(CURVE_COLUMN, key)
    return out if keep_coordinates else out.drop(*coord_names)


def _orderable(dtype: T.DataType) -> bool:
    """Types xxhash64 accepts and ORDER BY can sort (no maps / variants inside)."""
    if isinstance(dtype, T.MapType) or type(dtype).__name__ == "VariantType":
        return False
    if isinstance(dtype, T.ArrayType):
        return _orderable(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return all(_orderable(f.dataType) for f in dtype.fields)
    return True


def curve_block_index(df: DataFrame, block_rows: int, tie_columns: Sequence[str] | None = None) -> DataFrame:
    """`df` plus a bigint `_block`: (row number in `_curve` order - 1) div block_rows.

    Ties on `_curve` are broken by `xxhash64` of `tie_columns` (default: all
    hashable columns) and then by those columns themselves, so the assignment
    is deterministic up to rows that are identical. Every block has exactly block_rows rows except the
    last. The window has no partitioning: Spark moves all rows to one task
    (fine for the sizes this baseline is benchmarked on).
    """
    if isinstance(block_rows, bool) or not isinstance(block_rows, int) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive int, got {block_rows!r}")
    if CURVE_COLUMN not in df.columns:
        raise ValueError(f"df has no {CURVE_COLUMN} column; call with_curve_key first")
    ties = list(tie_columns) if tie_columns is not None else [
        f.name for f in df.schema.fields if f.name not in (CURVE_COLUMN, BLOCK_INDEX_COLUMN) and _orderable(f.dataType)]
    order = [_col(CURVE_COLUMN)]
    if ties:
        order.append(F.xxhash64(*[_col(c) for c in ties]))
        order += [_col(c).asc_nulls_first() for c in ties]
    row = F.row_number().over(Window.orderBy(*order))
    return df.withColumn(BLOCK_INDEX_COLUMN, F.floor((row - F.lit(1)) / F.lit(block_rows)).cast("long"))
