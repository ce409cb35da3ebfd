"""Run random queries as written and as rewritten, and compare their answers.

For each generated query: route it (`route_query`), rewrite it with the
routes' `block_id IN (...)` filters (`rewrite_sql`), run both on the same
engine over the same block folders, and compare the answers as multisets
(floats within a relative tolerance, NULLs equal). A difference is a
skipping bug: `Mismatch` keeps both statements and the differing rows so it
can be reproduced. A query the engine cannot run as written is "not
comparable" (counted and reported, never silently dropped); a rewritten
query that fails where the original ran is a mismatch (the rewrite broke it).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tqdm import tqdm

from layout_core.catalog import CatalogSnapshot
from layout_core.base.schema import Schema
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.check.engines import EngineError
from layout_core.check.profile import DataProfile
from layout_core.check.random_queries import GeneratedQuery, generate_queries

log = logging.getLogger("layout.check")

REL_TOL = 1e-9
SHOW_ROWS = 5  # differing rows kept per mismatch


@dataclass(frozen=True)
class Mismatch:
    engine: str
    index: int
    original: str
    rewritten: str
    difference: str  # what differs, in words
    missing: tuple = ()  # rows of the original's answer the rewritten one lacks (first few)
    extra: tuple = ()  # rows only the rewritten one returned (first few)

    def describe(self) -> str:
        lines = [f"query {self.index} on {self.engine}: {self.difference}",
                 f"  as written: {self.original}", f"  rewritten:  {self.rewritten}"]
        lines += [f"  missing: {row!r}" for row in self.missing]
        lines += [f"  extra:   {row!r}" for row in self.extra]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"engine": self.engine, "index": self.index, "original": self.original,
                "rewritten": self.rewritten, "difference": self.difference,
                "missing": [list(map(str, r)) for r in self.missing],
                "extra": [list(map(str, r)) for r in self.extra]}


@dataclass(frozen=True)
class NotComparable:
    engine: str
    index: int
    sql: str
    reason: str


@dataclass
class CheckResult:
    queries: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    not_comparable: list[NotComparable] = field(default_factory=list)
    not_analyzed: int = 0  # queries the router could not analyze (they read everything)
    queries_skipping: int = 0  # queries with some table reference reading fewer blocks than it has
    seconds: float = 0.0
    runs: Counter = field(default_factory=Counter)  # engine -> queries compared on it

    @property
    def mismatching_queries(self) -> int:
        return len({m.index for m in self.mismatches})

    def to_json(self) -> dict:
        """What `layout check --json` prints."""
        return {"queries": self.queries, "mismatches": self.mismatching_queries,
                "queries_skipping": self.queries_skipping, "seconds": round(self.seconds, 1)}

    def summary(self) -> str:
        skipping = self.queries_skipping / self.queries if self.queries else 0.0
        engines = ", ".join(f"{n} on {e}" for e, n in sorted(self.runs.items()))
        return (f"{self.queries} queries ({engines}): {self.mismatching_queries} mismatches, "
                f"{len(self.not_comparable)} not comparable, {self.not_analyzed} not analyzed, "
                f"{self.queries_skipping} skipped at least one block ({skipping:.1%}), {self.seconds:.1f} s")


# ---------------------------------------------------------------------------
# Comparing answers


def _normal(value: Any) -> Any:
    """A value as compared: floats to 9 significant digits (their last bits depend
    on the order rows are added in), NaN equal to NaN."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float(f"{value:.9g}")
    return value


def compare_answers(expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]]
                    ) -> tuple[bool, str, tuple, tuple]:
    """(equal, what differs, rows missing from actual, rows extra in actual) of two
    answers as multisets of rows; floats within a relative tolerance, NULLs equal."""
    left = Counter(tuple(map(_normal, row)) for row in expected)
    right = Counter(tuple(map(_normal, row)) for row in actual)
    if left == right:
        return True, "", (), ()
    missing, extra = left - right, right - left
    if sum(missing.values()) == sum(extra.values()) and _close(sorted(missing.elements(), key=_key),
                                                               sorted(extra.elements(), key=_key)):
        return True, "", (), ()  # floats rounded to different sides of the 9th digit
    what = f"{len(expected)} rows as written, {len(actual)} rewritten"
    return (False, what, tuple(list(missing.elements())[:SHOW_ROWS]), tuple(list(extra.elements())[:SHOW_ROWS]))


def _key(row: tuple) -> tuple:
    return tuple((0, "") if v is None else (1, round(v, 6)) if isinstance(v, float) else (2, repr(v)) for v in row)


def _close(a: list[tuple], b: list[tuple]) -> bool:
    for x, y in zip(a, b):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                if not math.isclose(u, v, rel_tol=REL_TOL * 1000, abs_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


# ---------------------------------------------------------------------------
# Running


def skips_a_block(route) -> bool:
    return any(not ref.read_all and len(ref.blocks) < ref.blocks_total for ref in route.refs)


def check_query(engine, query: GeneratedQuery, rewritten: str, result: CheckResult) -> None:
    """Run one query as written and rewritten on `engine`, recording what happened."""
    try:
        expected = engine.run(query.sql)
    except EngineError as e:
        result.not_comparable.append(NotComparable(engine.name, query.index, query.sql, str(e)))
        return
    try:
        actual = engine.run(rewritten)
    except EngineError as e:
        result.mismatches.append(Mismatch(engine.name, query.index, query.sql, rewritten,
                                          f"the rewritten query failed where the original ran: {e}"))
        return
    result.runs[engine.name] += 1
    equal, what, missing, extra = compare_answers(expected, actual)
    if not equal:
        mismatch = Mismatch(engine.name, query.index, query.sql, rewritten, what, missing, extra)
        log.error("MISMATCH %s", mismatch.describe())
        result.mismatches.append(mismatch)


def run_check(schema: Schema, snapshot: CatalogSnapshot, profile: DataProfile, engine, queries: int,
              seed: int = 1, spark_engine: Callable[[], Any] | None = None, spark_sample: int = 0,
              dips: bool = True, progress: bool = False) -> CheckResult:
    """Generate `queries` queries (seed `seed`), run all on `engine`, and a seeded
    sample of `spark_sample` of them on the engine `spark_engine()` makes (started
    only when needed)."""
    index = RoutingIndex.from_snapshot(snapshot)
    result = CheckResult()
    started = time.monotonic()
    sample = set(random.Random(f"spark-sample/{seed}").sample(range(queries), min(spark_sample, queries))) \
        if spark_engine is not None and spark_sample > 0 else set()
    sampled: list[tuple[GeneratedQuery, str]] = []
    bar = _progress(queries, engine.name if engine is not None else "spark", progress)
    for query in generate_queries(schema, profile, queries, seed):
        route = route_query(query.sql, index, schema, dips=dips)
        rewritten = rewrite_sql(route, index)
        result.queries += 1
        result.not_analyzed += not route.analyzed
        result.queries_skipping += skips_a_block(route)
        if engine is not None:
            check_query(engine, query, rewritten, result)
        if query.index in sample:
            sampled.append((query, rewritten))
        bar.update(1)
        if not progress and result.queries % 1000 == 0:
            log.info("%d of %d queries, %d mismatches so far", result.queries, queries, result.mismatching_queries)
    bar.close()
    if sampled:
        spark = spark_engine()
        for query, rewritten in sampled:
            check_query(spark, query, rewritten, result)
        log.info("%d sampled queries run on %s", len(sampled), spark.name)
    result.seconds = time.monotonic() - started
    return result


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, engine: str, show: bool):
    if not show:
        return _NoBar()

    return tqdm(total=total, desc=f"check on {engine}", unit="query", mininterval=2.0)
