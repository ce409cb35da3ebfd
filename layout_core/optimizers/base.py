"""What every layout optimizer is: a name, typed settings, a cut choice and `fit`.

An optimizer turns one table's reduced data into a `LayoutPlan`:

    choose_cuts(workload, settings)          -> the candidate cuts rows are featurized by
    fit(PlanInputs, settings)                -> LayoutPlan (tree(s), cuts kept, block rule, sizes)

The nightly steps, `layout bench tpch`, `layout bench sun` and `make demo`
all go through `plan.plan_layout`, which resolves the settings, checks the
inputs and calls `fit`; none of them sizes leaves, samples or picks a sort
column on its own.
"""

from __future__ import annotations

import sys

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from layout_core.algorithms.types import Workload, reference_halves, unpack_bit_strings
from layout_core.base.errors import UserError
from layout_core.base.names import MAX_BLOCK_ROWS
from layout_core.predicates import Predicate, to_sql
from layout_core.base.schema import TableSchema


class PlanError(UserError, ValueError):
    """The settings or inputs of a plan are wrong (a user mistake, reported in one line)."""


# ---------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class Setting:
    """One typed setting of an optimizer: `kind` is int, float, str, "columns"
    (names), "int_or_auto" (an integer, or the word auto: let the optimizer choose)
    or "choice" (one of the words `choices`, case-insensitive)."""

    name: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()

    def parse(self, value: Any) -> Any:
        """`value` as this setting's type, from JSON, a flag or an environment variable."""
        if self.kind == "choice":
            word = value.strip().lower() if isinstance(value, str) else value
            if word not in self.choices:
                raise PlanError(f"setting {self.name} takes one of {', '.join(self.choices)}, not {value!r}")
            return word
        if self.kind == "columns":
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",")]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise PlanError(f"setting {self.name} takes column names, not {value!r}")
            return tuple(v for v in value if v)
        if self.kind == "int_or_auto" and isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        if self.kind == "str":
            if value is not None and not isinstance(value, str):
                raise PlanError(f"setting {self.name} takes a string, not {value!r}")
            return value or ""
        try:
            number = float(value) if self.kind == "float" else int(str(value))
        except (TypeError, ValueError):
            wanted = {"float": "a number", "int_or_auto": "an integer or auto"}.get(self.kind, "an integer")
            raise PlanError(f"setting {self.name} takes {wanted}, not {value!r}") from None
        if number < 0 or (self.kind == "float" and not math.isfinite(number)):
            raise PlanError(f"setting {self.name} must be >= 0, not {value!r}")
        return number


BLOCK_ROWS = Setting("block_rows", "int", 50_000, "rows per block (a tree leaf holds at least one block)")
EXCLUDE_COLUMNS = Setting("exclude_columns", "columns", (), "columns whose predicates never become cuts")
SORT_COLUMN = Setting("sort_column", "str", "",
                      "order of rows inside a block range (default: the column the log filters most by a range, "
                      "else the primary key)")
SAMPLE_ROWS = Setting("sample_rows", "int", 150_000,
                      "build the plan on a row-hash sample of about this many rows (0: all rows; MTO §4.2)")
MAX_CUTS = Setting("max_cuts", "int_or_auto", "auto",
                   "candidate cuts kept per kind (simple, join-induced), most frequent first (auto: two per "
                   "training reference to the table, at least 96)")
LEAF_ORDER = Setting("leaf_order", "choice", "range",
                     "order of rows inside a leaf: range (sort_column, else the column the log filters most by "
                     "a range, else the primary key) or join_key (the primary key's first column, so a leaf's "
                     "blocks are key ranges; conflicts with sort_column)", choices=("range", "join_key"))


# ---------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class CandidateCut:
    """A predicate rows are featurized by (bit = the row satisfies it)."""

    predicate: Predicate
    kind: str = "simple"  # or "join_induced"
    support: int = 0  # training references that imply it or are disjoint with it (fineblock: Sun's support)

    @property
    def sql(self) -> str:
        return to_sql(self.predicate)


@dataclass(frozen=True)
class PlanWorkload:
    """What a plan needs of the query log, for one table and its cuts.

    implies[q][j] / disjoint[q][j]: training reference q's predicate implies /
    is disjoint with cut j (MTO's workload matrices); `filtered_columns`: the
    table's columns by how many references filter them; `range_columns`: those
    filtered by a range, most often first; `induced_columns`: for a fact table
    (`TableQueries.is_fact`), its foreign keys by how many references filter
    the tables they reference (join-induced predicates reach it through
    them); `held_out_cuts`: when the
    references split in two halves (`algorithms.types.reference_halves`),
    per half the cuts its own references make (their conjuncts, the ranges
    between their literals, their ORs' hulls), so that a layout fitted to one
    half and measured on the other does not see the other half's literals
    (pando's trees=auto); () when they do not split."""

    implies: tuple[tuple[bool, ...], ...] = ()
    disjoint: tuple[tuple[bool, ...], ...] = ()
    filtered_columns: tuple[str, ...] = ()
    range_columns: tuple[str, ...] = ()
    held_out_cuts: tuple[tuple[bool, ...], ...] = ()
    induced_columns: tuple[str, ...] = ()

    @property
    def queries(self) -> int:
        return len(self.implies)

    def matrices(self, n_cuts: int):
        shape = (self.queries, n_cuts)
        return Workload(np.array(self.implies, dtype=bool).reshape(shape),
                        np.array(self.disjoint, dtype=bool).reshape(shape))

    def to_json(self) -> dict:
        return {"implies": [[int(b) for b in row] for row in self.implies],
                "disjoint": [[int(b) for b in row] for row in self.disjoint],
                "filtered_columns": list(self.filtered_columns), "range_columns": list(self.range_columns),
                "held_out_cuts": [[int(b) for b in row] for row in self.held_out_cuts],
                "induced_columns": list(self.induced_columns)}

    @classmethod
    def from_json(cls, data: Mapping) -> "PlanWorkload":
        def bools(rows):
            return tuple(tuple(bool(b) for b in row) for row in rows)

        # features written before held_out_cuts (induced_columns) existed have none: trees=auto then
        # sees every cut (tuned sorts a table without a filtered date column by its primary key)
        return cls(bools(data["implies"]), bools(data["disjoint"]), tuple(data["filtered_columns"]),
                   tuple(data["range_columns"]), bools(data.get("held_out_cuts", ())),
                   tuple(data.get("induced_columns", ())))


@dataclass(frozen=True)
class TableQueries:
    """The analyzed training queries, seen from one table."""

    table: str
    analyses: tuple = ()
    key_hops: Any = ()

    @property
    def references(self) -> int:
        """References to the table: a self-join counts each of its scans (as `Window.references`)."""
        return sum(len(a.refs_of_table(self.table)) for a in self.analyses)

    def summary(self, cuts: Sequence[CandidateCut], table: TableSchema) -> PlanWorkload:
        """The workload matrices of `cuts`, and the columns filtered most (those with a min and max)."""
        # sqlglot (via sql.analysis) only when cuts are chosen: layout_core.optimizers imports numpy only
        from layout_core.workload.tree_inputs import (
            filtered_columns, induced_columns, range_filtered_columns, workload_matrices,
        )

        orderable = set(table.orderable_columns)
        induced = induced_columns(self.analyses, self.table, self.key_hops) if self.is_fact else []
        matrices = workload_matrices(self.analyses, self.table, self.key_hops, [c.predicate for c in cuts])
        return PlanWorkload(
            tuple(map(tuple, matrices.implies.tolist())), tuple(map(tuple, matrices.disjoint.tolist())),
            tuple(c for c in filtered_columns(self.analyses, self.table, 10 ** 6) if c in orderable),
            tuple(c for c, _ in range_filtered_columns(self.analyses, self.table) if c in orderable),
            self.held_out_cuts(matrices, cuts),
            tuple(c for c, _ in induced if c in orderable))

    @property
    def is_fact(self) -> bool:
        """No foreign key references the table (TPC-DS's sales, returns and inventory; TPC-H's
        lineitem and partsupp): it is what the others describe."""
        return all(hop.parent_table != self.table for hop in self.key_hops)

    def held_out_cuts(self, matrices, cuts: Sequence[CandidateCut]) -> tuple[tuple[bool, ...], ...]:
        """Per half of the references, which of `cuts` its own references make (see PlanWorkload)."""
        # sqlglot (via sql.analysis) only when cuts are chosen, as in summary
        from layout_core.workload.tree_inputs import candidate_cut_lists

        half = reference_halves(matrices)
        if half is None:
            return ()
        masks = []
        for h in (0, 1):
            simple, induced = candidate_cut_lists(self.analyses, self.table, self.key_hops, max_per_kind=10 ** 9,
                                                  references=(half == h).tolist())
            own = set(simple) | set(induced)
            masks.append(tuple(c.predicate in own for c in cuts))
        return tuple(masks)


@dataclass(frozen=True, eq=False)
class VectorSample:
    """A table's (vector, count) pairs, of all its rows or of a sample.

    `keys` are bit strings (character j = cut j), `rows` the table's rows, so
    `scale` = rows / sampled rows turns a sampled count into an estimate."""

    keys: tuple[str, ...]
    counts: np.ndarray
    rows: int

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts, dtype=np.int64).reshape(-1)
        if counts.shape[0] != len(self.keys):
            raise PlanError(f"{len(self.keys)} vectors but {counts.shape[0]} counts")
        counts.flags.writeable = False
        object.__setattr__(self, "counts", counts)

    @property
    def sampled_rows(self) -> int:
        return int(self.counts.sum())

    @property
    def scale(self) -> float:
        return self.rows / self.sampled_rows if self.sampled_rows else 1.0

    def vectors(self, n_cuts: int) -> np.ndarray:
        return unpack_bit_strings(list(self.keys), n_cuts)


def schema_fingerprint(table: TableSchema) -> str:
    """Changes when the table's columns or their types change: a plan for another schema is refused."""
    text = json.dumps([table.name, [list(c) for c in table.columns]])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PlanInputs:
    table: TableSchema
    vectors: VectorSample
    cuts: tuple[CandidateCut, ...]
    workload: PlanWorkload = field(default_factory=PlanWorkload)


# ---------------------------------------------------------------------------
# The optimizer interface


class Optimizer:
    """Subclass, set `name`, `help`, `settings`, `router_keeps`, and implement `fit`.

    `router_keeps` says what the router gets besides zone maps: the cut bits of
    every block ("cut bits") or nothing ("zone maps only")."""

    name: ClassVar[str]
    help: ClassVar[str]
    settings: ClassVar[tuple[Setting, ...]] = (BLOCK_ROWS,)
    router_keeps: ClassVar[str] = "zone maps only"
    samples: ClassVar[bool] = False  # may fit on a sample of the rows (needs the sample_rows setting)

    def resolve(self, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every setting with its value: given ones parsed, the rest defaults. Unknown names are refused."""
        raw = dict(raw or {})
        known = {s.name: s for s in self.settings}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise PlanError(f"optimizer {self.name} has no setting {', '.join(unknown)} "
                            f"(its settings: {', '.join(known)})")
        resolved = {name: s.parse(raw[name]) if name in raw and raw[name] is not None else s.default
                    for name, s in known.items()}
        if not 1 <= resolved["block_rows"] <= MAX_BLOCK_ROWS:
            raise PlanError(f"block_rows must be positive and at most {MAX_BLOCK_ROWS:_}, "
                            f"not {resolved['block_rows']}")
        return resolved

    def choose_cuts(self, workload: TableQueries, settings: Mapping[str, Any]) -> list[CandidateCut]:
        """The cuts rows are featurized by; none by default."""
        return []

    def fit(self, inputs: PlanInputs, settings: Mapping[str, Any]):
        raise NotImplementedError

    def describe(self) -> str:
        lines = [f"{self.name}: {self.help} (router: {self.router_keeps})"]
        lines += [f"  {s.name} ({'|'.join(s.choices) if s.choices else s.kind}, default {s.default!r}): {s.help}"
                  for s in self.settings]
        return "\n".join(lines)


def show_progress() -> bool:
    """A progress bar for long optimizer loops on a terminal; elsewhere (Airflow task
    logs, pipes) the loops log a line of numbers every few hundred steps instead."""
    return sys.stderr.isatty()


def check_leaf_order(sort_column: str, leaf_order: str) -> None:
    """An explicit sort_column and leaf_order=join_key name two orders: refused, neither wins."""
    if leaf_order == "join_key" and sort_column:
        raise PlanError(f"settings leaf_order=join_key and sort_column={sort_column!r} conflict: "
                        f"join_key orders a leaf by the primary key; give one of them")


def sort_columns(table: TableSchema, workload: PlanWorkload, sort_column: str,
                 leaf_order: str = "range") -> tuple[str, ...]:
    """The order rows take inside a block range. leaf_order "range": the given
    column, else the column the log filters most by a range (so zone maps of
    neighbouring blocks stay narrow), else the primary key. leaf_order
    "join_key": the primary key's first column (a leaf's blocks are ranges of
    the key joins match on); a sort_column as well is refused."""
    check_leaf_order(sort_column, leaf_order)
    if leaf_order == "join_key":
        if not table.primary_key:
            raise PlanError(f"leaf_order=join_key needs a primary key: {table.name} has none")
        return (table.primary_key[0],)
    if leaf_order != "range":
        raise PlanError(f"leaf_order is range or join_key, not {leaf_order!r}")
    if sort_column:
        if not table.has_column(sort_column):
            raise PlanError(f"{table.name} has no column {sort_column!r} to sort by")
        return (sort_column,)
    return workload.range_columns[:1] or tuple(table.primary_key)


def excluded(cut: Predicate, columns: Sequence[str]) -> bool:
    """A cut on no column, or on an excluded one, is not used."""
    return not cut.columns() or bool(cut.columns() & set(columns))
