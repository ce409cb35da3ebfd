"""Skewed and time-ordered TPC-H: a numpy pass over the uniform generator's Parquet.

The uniform generator draws every column independently of the keys; warehouses do not
look like that. Two skew modes follow the skewed TPC-H generator of Chaudhuri and
Narasayya (the diPs paper's reference [31]) with Zipf factor z:

- `runs`: the domain's values in a random order v1, v2, ...; value vk fills about
  C / k^z consecutive rows in key order (C makes the runs add up to the table's rows),
  which ties keys to values: a block of keys holds few values.
- `iid`: the same frequencies, each row's value drawn independently of its key (the
  runs shuffled): a negative control with the same histogram and no key correlation.

Skewed columns: o_custkey (over the customers that may order: a third of them keep no
orders, for q13 and q22), o_orderdate, l_partkey, l_shipdate, l_commitdate and
l_receiptdate through their offsets from the order date, c_nationkey, s_nationkey,
p_brand (with p_mfgr) and p_size. What depends on them is recomputed so that foreign
keys hold and every template stays meaningful: l_suppkey through the partsupp bridge
(the same of the part's four suppliers as before), l_extendedprice from the part's
price, the line's status and return flag from its dates, the order's status and total
price from its lines, the phone's country code from the nation.

`time_ordered_keys` renumbers orders by order date (then by the old key), as
warehouses fed by OLTP systems have them, and sorts lineitem by the new keys.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout_core.base.errors import ToolError
from layout_core.workload.arrow_columns import cents, decimal_from_cents
from layout_core.workload.tpch_data import generate_tpch

SKEW_MODES = ("runs", "iid")
# TPC-H's dates (specification 4.2.2.12 and 4.2.3): orders until ENDDATE - 151 days, lines
# shipped 1-121 days after the order, committed 30-90 days after it, received 1-30 days
# after shipping; CURRENTDATE decides the line's status and return flag.
START_DATE, LAST_ORDER_DATE, CURRENT_DATE = dt.date(1992, 1, 1), dt.date(1998, 8, 2), dt.date(1995, 6, 17)
SHIP_DAYS, COMMIT_DAYS, RECEIPT_DAYS = (1, 121), (30, 90), (1, 30)
NATIONS = 25
BRANDS = [f"Brand#{m}{n}" for m in range(1, 6) for n in range(1, 6)]
SIZES = (1, 50)
EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class TpchVariant:
    """How the uniform tables are changed: Zipf factor `skew` (0: left uniform) applied in
    `skew_mode`, and orders renumbered by date when `time_ordered_keys`."""

    skew: float = 0.0
    skew_mode: str = "runs"
    time_ordered_keys: bool = False
    seed: int = 1

    def __post_init__(self):
        if self.skew_mode not in SKEW_MODES:
            raise ValueError(f"unknown skew mode {self.skew_mode!r}: use one of {', '.join(SKEW_MODES)}")
        if self.skew < 0 or not np.isfinite(self.skew):
            raise ValueError(f"skew must be a Zipf factor > 0 (or 0 for uniform data), not {self.skew}")

    @property
    def uniform(self) -> bool:
        return self.skew == 0 and not self.time_ordered_keys

    @property
    def name(self) -> str:
        """What reports call the data: uniform, skew2-runs, skew2-iid+time-ordered-keys, ..."""
        parts = [f"skew{self.skew:g}-{self.skew_mode}"] if self.skew else []
        if self.time_ordered_keys:
            parts.append("time-ordered-keys")
        return "+".join(parts) or "uniform"


def zipf_run_lengths(n_rows: int, domain_size: int, z: float) -> np.ndarray:
    """How many rows the k-th value (k = 1..domain_size) fills: floor(C / k^z) with
    C = n_rows / sum(1 / k^z); the rows the floors leave go one each to the first values."""
    weights = 1.0 / np.arange(1, domain_size + 1, dtype=np.float64) ** z
    lengths = np.floor(n_rows * weights / weights.sum()).astype(np.int64)
    short = n_rows - int(lengths.sum())
    lengths[:short] += 1  # short < domain_size: each floor loses less than one row
    return lengths


def zipf_column(n_rows: int, domain: np.ndarray, z: float, mode: str, rng: np.random.Generator) -> np.ndarray:
    """A column of `n_rows` values from `domain` with Zipf(z) frequencies, in runs over
    the rows' order (`runs`) or shuffled (`iid`); the value of each rank chosen at random."""
    values = rng.permutation(domain)
    column = np.repeat(values, zipf_run_lengths(n_rows, len(domain), z))
    if mode == "iid":
        rng.shuffle(column)
    return column


def _days(date: dt.date) -> int:
    return (date - EPOCH).days


def _replace(table: pa.Table, name: str, values) -> pa.Table:
    """`table` with column `name` replaced by `values`, cast to the column's type."""
    i = table.schema.get_field_index(name)
    values = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
    return table.set_column(i, table.schema.field(i), values.cast(table.schema.field(i).type))


def _with_country_codes(phones: pa.ChunkedArray, nations: np.ndarray) -> pa.Array:
    """TPC-H phones start with the nation's country code, nation key + 10 (q22 reads it)."""
    codes = pa.array(nations + 10).cast(pa.string())
    return pc.binary_join_element_wise(codes, pc.utf8_slice_codeunits(phones.combine_chunks(), 2), "")


def skew_tables(tables: dict[str, pa.Table], variant: TpchVariant) -> dict[str, pa.Table]:
    """The eight tables changed as `variant` says (inputs in the generator's key order)."""
    if variant.uniform:
        return dict(tables)
    out = dict(tables)
    rng = np.random.default_rng(variant.seed)
    if variant.skew:
        out = _skew(out, variant, rng)
    if variant.time_ordered_keys:
        out = _time_ordered_keys(out)
    return out


def _skew(tables: dict[str, pa.Table], variant: TpchVariant, rng: np.random.Generator) -> dict[str, pa.Table]:
    z, mode = variant.skew, variant.skew_mode

    def column(n_rows: int, domain) -> np.ndarray:
        return zipf_column(n_rows, np.asarray(domain), z, mode, rng)

    part = tables["part"].sort_by("p_partkey")
    brands = pa.array(column(part.num_rows, BRANDS))
    part = _replace(part, "p_brand", brands)  # Brand#MN is made by Manufacturer#M
    maker = pc.utf8_slice_codeunits(brands, 6, 7)
    part = _replace(part, "p_mfgr", pc.binary_join_element_wise("Manufacturer#", maker, ""))
    part = _replace(part, "p_size", column(part.num_rows, np.arange(SIZES[0], SIZES[1] + 1)))

    people = {}
    for table, key, nation, phone in (("customer", "c_custkey", "c_nationkey", "c_phone"),
                                      ("supplier", "s_suppkey", "s_nationkey", "s_phone")):
        rows = tables[table].sort_by(key)
        nations = column(rows.num_rows, np.arange(NATIONS))
        rows = _replace(rows, nation, nations)
        people[table] = _replace(rows, phone, _with_country_codes(rows[phone], nations))

    customers = np.asarray(people["customer"]["c_custkey"])
    orders = tables["orders"].sort_by("o_orderkey")
    orders = _replace(orders, "o_custkey", column(orders.num_rows, customers[customers % 3 != 0]))
    order_days = column(orders.num_rows, np.arange(_days(START_DATE), _days(LAST_ORDER_DATE) + 1))
    orders = _replace(orders, "o_orderdate", order_days.astype("datetime64[D]"))

    lines = tables["lineitem"].sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])
    lines = _lines_on_new_parts(lines, part, tables["partsupp"], column)
    lines, orders = _dates_and_statuses(lines, orders, order_days, column, rng)
    return {**tables, "part": part, **people, "orders": orders, "lineitem": lines}


def _lines_on_new_parts(lines: pa.Table, part: pa.Table, partsupp: pa.Table, column) -> pa.Table:
    """Skewed l_partkey; l_suppkey the same of the new part's four suppliers (in partsupp's
    order) as the old one was of the old part's; l_extendedprice = quantity x retail price."""
    partkeys = np.asarray(part["p_partkey"])
    bridge = partsupp.sort_by([("ps_partkey", "ascending"), ("ps_suppkey", "ascending")])
    ps_part, ps_supp = np.asarray(bridge["ps_partkey"]), np.asarray(bridge["ps_suppkey"])
    per_part = np.bincount(ps_part, minlength=partkeys.max() + 1)
    if per_part[partkeys].min() != per_part[partkeys].max():
        raise ToolError("partsupp does not give every part the same number of suppliers")
    width = int(per_part[partkeys[0]])
    suppliers = np.zeros((partkeys.max() + 1, width), dtype=np.int64)
    suppliers[ps_part, np.arange(len(ps_part)) % width] = ps_supp

    old_part, old_supp = np.asarray(lines["l_partkey"]), np.asarray(lines["l_suppkey"])
    slot = np.argmax(suppliers[old_part] == old_supp[:, None], axis=1)
    new_part = column(lines.num_rows, partkeys)
    price = np.zeros(partkeys.max() + 1, dtype=np.int64)
    price[partkeys] = cents(part["p_retailprice"])
    quantity = cents(lines["l_quantity"]) // 100  # whole units
    lines = _replace(lines, "l_partkey", new_part)
    lines = _replace(lines, "l_suppkey", suppliers[new_part, slot])
    return _replace(lines, "l_extendedprice",
                    decimal_from_cents(quantity * price[new_part], lines.schema.field("l_extendedprice").type))


def _dates_and_statuses(lines: pa.Table, orders: pa.Table, order_days: np.ndarray, column,
                        rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """Line dates from the (new) order date and skewed offsets; the line's status and return
    flag from its dates; the order's status and total price from its lines."""
    order_keys = np.asarray(orders["o_orderkey"])
    line_order = np.searchsorted(order_keys, np.asarray(lines["l_orderkey"]))
    ordered = order_days[line_order]

    def offsets(days: tuple[int, int]) -> np.ndarray:
        return column(lines.num_rows, np.arange(days[0], days[1] + 1))

    ship = ordered + offsets(SHIP_DAYS)
    commit = ordered + offsets(COMMIT_DAYS)
    receipt = ship + offsets(RECEIPT_DAYS)
    today = _days(CURRENT_DATE)
    old_flag = np.asarray(lines["l_returnflag"].cast(pa.string()), dtype=object)
    returned = np.where(np.isin(old_flag, ["R", "A"]), old_flag, np.where(rng.random(lines.num_rows) < 0.5, "R", "A"))
    flag = np.where(receipt <= today, returned, "N")
    status = np.where(ship > today, "O", "F")
    for name, values in (("l_shipdate", ship), ("l_commitdate", commit), ("l_receiptdate", receipt)):
        lines = _replace(lines, name, values.astype("datetime64[D]"))
    lines = _replace(lines, "l_returnflag", flag.astype(str))
    lines = _replace(lines, "l_linestatus", status.astype(str))

    # o_totalprice = sum(extendedprice x (1 + tax) x (1 - discount)), in cents
    charge = (cents(lines["l_extendedprice"]) * (100 + cents(lines["l_tax"])) * (100 - cents(lines["l_discount"])))
    charge = np.round(charge / 10_000).astype(np.int64)
    total = np.bincount(line_order, weights=charge, minlength=len(order_keys)).round().astype(np.int64)
    lines_open = np.bincount(line_order, weights=status == "O", minlength=len(order_keys))
    lines_all = np.bincount(line_order, minlength=len(order_keys))
    order_status = np.where(lines_open == lines_all, "O", np.where(lines_open == 0, "F", "P"))
    orders = _replace(orders, "o_orderstatus", order_status.astype(str))
    orders = _replace(orders, "o_totalprice", decimal_from_cents(total, orders.schema.field("o_totalprice").type))
    return lines, orders


def _time_ordered_keys(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Orders renumbered by (order date, old key) with the same set of keys; lineitem follows
    and is sorted by the new keys."""
    orders = tables["orders"].sort_by([("o_orderdate", "ascending"), ("o_orderkey", "ascending")])
    old_keys = np.asarray(orders["o_orderkey"])
    new_keys = np.sort(old_keys)
    orders = _replace(orders, "o_orderkey", new_keys)
    by_old = np.argsort(old_keys)
    lines = tables["lineitem"]
    line_keys = np.asarray(lines["l_orderkey"])
    lines = _replace(lines, "l_orderkey", new_keys[by_old[np.searchsorted(old_keys[by_old], line_keys)]])
    lines = lines.sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])
    return {**tables, "orders": orders, "lineitem": lines}


def _plain_strings(table: pa.Table) -> pa.Table:
    """tpchgen-cli writes string_view columns, which pyarrow's sort and take do not handle yet."""
    fields = [pa.field(f.name, pa.string()) if f.type == pa.string_view() else f for f in table.schema]
    return table.cast(pa.schema(fields))


def write_variant(uniform: dict[str, Path], variant: TpchVariant, out: str | Path) -> dict[str, Path]:
    """The tables of `uniform` ({table: Parquet file}) changed by `variant`, as
    `<out>/<table>.parquet`. Written to a temporary folder renamed into place, so a
    killed run leaves no half-made tables; a folder already made for the same variant
    and inputs is kept."""
    out = Path(out)
    record = {"variant": asdict(variant), "inputs": {t: str(p) for t, p in sorted(uniform.items())}}
    marker = out / "_tpch_variant.json"
    paths = {t: out / f"{t}.parquet" for t in uniform}
    if marker.exists() and json.loads(marker.read_text()) == record and all(p.exists() for p in paths.values()):
        return paths
    tables = skew_tables({t: _plain_strings(pq.read_table(p)) for t, p in uniform.items()}, variant)
    staging = out.with_name(f".{out.name}.writing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for table, rows in tables.items():
        pq.write_table(rows, staging / f"{table}.parquet")
    (staging / marker.name).write_text(json.dumps(record))
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return paths


def generate_tpch_variant(scale_factor: float, out: str | Path, variant: TpchVariant) -> dict[str, Path]:
    """The 8 TPC-H tables at `scale_factor` as `variant` says, as `<out>/<table>.parquet`:
    the generator's uniform tables (kept beside `out` as `.<out name>.uniform` for the next
    variant) changed by `skew_tables`. Uniform: the generator writes `out` itself."""
    out = Path(out)
    if variant.uniform:
        return generate_tpch(scale_factor, out)
    uniform = generate_tpch(scale_factor, out.with_name(f".{out.name}.uniform"))
    return write_variant(uniform, variant, out)
