"""Tables, columns, primary and foreign keys, loaded from a YAML or JSON file.

The TPC-H schema ships with the package (`load_schema("tpch")`); users pass
the path of their own file in the same format:

    name: shop
    tables:
      sales:
        columns: {sale_id: bigint, store_id: bigint, day: date, amount: "decimal(12,2)"}
        primary_key: [sale_id]
        partition_column: day        # optional
        foreign_keys:
          - {columns: [store_id], references: stores, ref_columns: [store_id]}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from layout_core.base.errors import UserError


@dataclass(frozen=True, slots=True, order=True)
class Column:
    """A column as predicates name it: its name and its type kind (predicates.model.KINDS).

    A virtual column is a deterministic arithmetic expression over columns of one
    table (`sqrt(power(x1 - x0, 2) + ...)`): its name is the expression's Spark SQL,
    `reads` the columns it reads (empty for a stored column). Predicates on it
    reason like those on a stored column; no block statistics exist for it, so
    only cut bits and tree paths skip on it."""

    name: str
    kind: str = "other"
    reads: tuple[str, ...] = ()

    @property
    def virtual(self) -> bool:
        return bool(self.reads)


@dataclass(frozen=True, slots=True)
class Hop:
    """One PK -> FK step of an induction path: parent.key = child.fk."""

    parent_table: str
    parent_column: str
    child_table: str
    child_column: str

    def __str__(self) -> str:
        return f"{self.parent_table}.{self.parent_column}->{self.child_table}.{self.child_column}"


class KeyHops(tuple):
    """A schema's key hops (`Schema.key_hops`), with what `QueryAnalysis.induced` looks
    them up by, built once per schema instead of once per reference routed."""

    @cached_property
    def by_child(self) -> dict[tuple[str, str], tuple[Hop, ...]]:
        """(child table, child column) -> the hops into it."""
        out: dict[tuple[str, str], list[Hop]] = {}
        for hop in self:
            out.setdefault((hop.child_table, hop.child_column), []).append(hop)
        return {key: tuple(hops) for key, hops in out.items()}

    @cached_property
    def order(self) -> dict[Hop, int]:
        """Each hop's rank by its text: the order `induced` walks them in."""
        return {hop: rank for rank, hop in enumerate(sorted(set(self), key=str))}


ORDERABLE_KINDS = ("int", "decimal", "string", "date", "timestamp")


class SchemaError(UserError, ValueError):
    """The schema file is missing, malformed or inconsistent."""


_KIND_BY_TYPE = [
    (re.compile(r"^(tinyint|smallint|int|integer|bigint|long|short|byte)$"), "int"),
    (re.compile(r"^(decimal|numeric|dec)(\(\s*\d+\s*(,\s*\d+\s*)?\))?$"), "decimal"),
    (re.compile(r"^(double|float|real)$"), "float"),
    (re.compile(r"^(string|varchar(\(\d+\))?|char(\(\d+\))?|text)$"), "string"),
    (re.compile(r"^date$"), "date"),
    (re.compile(r"^timestamp(_ntz|_ltz)?$"), "timestamp"),
    (re.compile(r"^(boolean|bool)$"), "bool"),
]


def kind_of(spark_type: str) -> str:
    """The reasoning kind of a Spark SQL type name ('other' when not orderable here)."""
    t = spark_type.strip().lower()
    for pattern, kind in _KIND_BY_TYPE:
        if pattern.match(t):
            return kind
    return "other"


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    references: str
    ref_columns: tuple[str, ...]


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, Spark type) in table order
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    partition_column: str | None = None

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @cached_property
    def column_name_set(self) -> frozenset[str]:
        """Built once: column resolution asks it for every table of every query."""
        return frozenset(self.column_names)

    def spark_type(self, column: str) -> str:
        for name, spark_type in self.columns:
            if name == column:
                return spark_type
        raise KeyError(f"{self.name} has no column {column!r}")

    def column(self, name: str) -> Column:
        try:
            return self._column_objects[name]
        except KeyError:
            raise KeyError(f"{self.name} has no column {name!r}") from None

    @cached_property
    def orderable_columns(self) -> tuple[str, ...]:
        """Columns with a min and a max: what zone maps and range filters work on."""
        return tuple(c for c in self.column_names if self.column(c).kind in ORDERABLE_KINDS)

    def has_column(self, name: str) -> bool:
        return name in self._column_objects

    @cached_property
    def _column_objects(self) -> dict[str, Column]:
        """Built once: query analysis looks up every column it resolves."""
        return {name: Column(name, kind_of(spark_type)) for name, spark_type in self.columns}


@dataclass(frozen=True)
class Schema:
    name: str
    tables: Mapping[str, TableSchema] = field(default_factory=dict)

    def table(self, name: str) -> TableSchema:
        try:
            return self.tables[name.lower()]
        except KeyError:
            raise SchemaError(f"unknown table {name!r}") from None

    def key_hops(self) -> KeyHops:
        """Single-column foreign keys that reference a table's whole primary key:
        the only joins MTO induces predicates through (parent key -> child fk)."""
        return self._key_hops

    # A schema is never changed after loading, so what is derived from it is
    # computed once (the router asks for these on every query).

    @cached_property
    def _key_hops(self) -> KeyHops:
        hops = []
        for child in self.tables.values():
            for fk in child.foreign_keys:
                parent = self.tables.get(fk.references)
                if (
                    parent is not None
                    and len(fk.columns) == 1
                    and parent.primary_key == fk.ref_columns
                ):
                    hops.append(Hop(parent.name, fk.ref_columns[0], child.name, fk.columns[0]))
        return KeyHops(hops)

    def spark_columns(self) -> dict[str, dict[str, str]]:
        """{table: {column: type}}, the form sqlglot's qualifier takes."""
        return {t.name: dict(t.columns) for t in self.tables.values()}

    def derived(self, key: str, build: Callable[[Schema], Any]) -> Any:
        """build(self), computed once per schema and key: lets other modules keep
        objects made from the schema (sqlglot's schema in sql.analysis) without
        this module importing their libraries."""
        cache = self._derived
        if key not in cache:
            cache[key] = build(self)
        return cache[key]

    @cached_property
    def _derived(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "tables": {
                t.name: {
                    "columns": dict(t.columns),
                    "primary_key": list(t.primary_key),
                    "foreign_keys": [
                        {"columns": list(fk.columns), "references": fk.references,
                         "ref_columns": list(fk.ref_columns)}
                        for fk in t.foreign_keys
                    ],
                    **({"partition_column": t.partition_column} if t.partition_column else {}),
                }
                for t in self.tables.values()
            },
        }


# Schema names and types are written into Spark SQL and DuckDB statements (views, casts):
# plain identifiers and type names only, so no name can end a quoted one or a statement.
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_(), <>:]{0,199}$")


def _checked_name(name: str, what: str) -> str:
    if not _NAME.match(name):
        raise SchemaError(f"{what} {name[:80]!r} must be a plain name: letters, digits and _, "
                          f"not starting with a digit, at most 128 characters")
    return name


def schema_from_dict(data: Mapping) -> Schema:
    if not isinstance(data, Mapping) or not isinstance(data.get("tables"), Mapping):
        raise SchemaError("a schema needs a 'tables' mapping")
    tables: dict[str, TableSchema] = {}
    for tname, spec in data["tables"].items():
        tname = _checked_name(str(tname).lower(), "table")
        cols = spec.get("columns") if isinstance(spec, Mapping) else None
        if not isinstance(cols, Mapping) or not cols:
            raise SchemaError(f"table {tname}: 'columns' must map column names to types")
        columns = tuple((_checked_name(str(c).lower(), f"table {tname}: column"), str(t)) for c, t in cols.items())
        bad_types = [t for _, t in columns if not _TYPE.match(t)]
        if bad_types:
            raise SchemaError(f"table {tname}: {bad_types[0][:80]!r} is not a Spark type name")
        names = {c for c, _ in columns}
        pk = tuple(str(c).lower() for c in spec.get("primary_key", []))
        fks = []
        for fk in spec.get("foreign_keys", []) or []:
            try:
                fks.append(ForeignKey(tuple(c.lower() for c in fk["columns"]),
                                      str(fk["references"]).lower(),
                                      tuple(c.lower() for c in fk["ref_columns"])))
            except (KeyError, TypeError, AttributeError):
                raise SchemaError(f"table {tname}: malformed foreign key {fk!r}") from None
        part = spec.get("partition_column")
        for col in pk + tuple(c for fk in fks for c in fk.columns) + ((part,) if part else ()):
            if col not in names:
                raise SchemaError(f"table {tname}: key or partition column {col!r} is not a column")
        tables[tname] = TableSchema(tname, columns, pk, tuple(fks), part)
    for t in tables.values():
        for fk in t.foreign_keys:
            parent = tables.get(fk.references)
            if parent is None:
                raise SchemaError(f"table {t.name}: foreign key references unknown table {fk.references!r}")
            missing = [c for c in fk.ref_columns if not parent.has_column(c)]
            if missing or len(fk.ref_columns) != len(fk.columns):
                raise SchemaError(f"table {t.name}: foreign key to {fk.references} names bad columns")
    return Schema(str(data.get("name", "schema")), tables)


SHIPPED_SCHEMAS = ("tpch", "trips", "tpcds")  # layout_core/schemas/<name>.yaml


def load_schema(name_or_path: str | Path) -> Schema:
    """A shipped schema by name ('tpch', 'trips'), or a YAML/JSON file by path."""
    text: str
    if str(name_or_path) in SHIPPED_SCHEMAS:
        text = resources.files("layout_core.schemas").joinpath(f"{name_or_path}.yaml").read_text()
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise SchemaError(f"no schema file at {path} (or use a shipped name: {', '.join(SHIPPED_SCHEMAS)})")
        text = path.read_text()
    try:
        data = json.loads(text) if str(name_or_path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise SchemaError(f"cannot read schema {name_or_path}: {e}") from None
    return schema_from_dict(data)
