"""Exact bits of join-induced cuts (MTO §4.1): one join per PK -> FK edge.

A join-induced cut on a table T is `JoinInduced(hops, source predicate)`:
the rows of T whose foreign key chain (T.fk -> parent.pk -> ... -> source)
reaches a source row satisfying the predicate. All cuts of a table are
evaluated together: the source predicates become flag columns of their
source tables, and the flags travel down the induction paths, one left join
per hop, shared by every cut whose path uses that hop. A row whose foreign
key has no parent row gets FALSE (it reaches no source row).

The literal keys of each cut (MTO's materialized cut: the key values of the
last hop's parent that satisfy it) are collected as a Roaring bitmap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from pyroaring import BitMap64
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from layout_core.predicates import Hop, JoinInduced, identifier, to_sql
from layout_core.spark.blocks import WORD_BITS, cut_flag_columns, packed_flags_sql, with_cut_flags, word_bit_sql


@dataclass(frozen=True)
class InducedFlags:
    frame: DataFrame  # the target rows with one boolean column per cut, named by `columns`
    columns: tuple[str, ...]


def _flag_name(i: int) -> str:
    return f"_ji{i}"


def with_induced_flags(target: DataFrame, cuts: Sequence[JoinInduced],
                       tables: Mapping[str, DataFrame]) -> InducedFlags:
    """Add one boolean column per join-induced cut to `target`."""
    if not cuts:
        return InducedFlags(target, ())
    frames = _propagate(list(cuts), tables)
    last_hops = {c.hops[-1] for c in cuts}
    out = target
    # Flags as SQL text, one selectExpr per frame: a few Py4J calls per flag added up to 22 s
    # for the SF 1 shift measurement's thousands of flags.
    flag_of: dict[str, str] = {}
    for h, hop in enumerate(sorted(last_hops, key=str)):
        parent_frame = frames[hop]
        carried = [c for c in parent_frame.columns if c.startswith("_ji")]
        # the flags packed into longs for the join, whose shuffles copy every column of a row
        words = {f"_jw{h}_{w}": carried[start:start + WORD_BITS]
                 for w, start in enumerate(range(0, len(carried), WORD_BITS))}
        keyed = parent_frame.selectExpr(f"{identifier(hop.parent_column)} AS _pk",
                                        *[f"{packed_flags_sql(flags)} AS {word}" for word, flags in words.items()])
        out = out.join(keyed, out[hop.child_column] == keyed["_pk"], "left").drop("_pk")
        for word, flags in words.items():
            flag_of.update({flag: word_bit_sql(word, j) for j, flag in enumerate(flags)})
    names = tuple(_flag_name(i) for i in range(len(cuts)))
    out = out.selectExpr(*map(identifier, target.columns), *[f"coalesce({flag_of[n]}, FALSE) AS {n}" for n in names])
    return InducedFlags(out, names)


def _propagate(cuts: list[JoinInduced], tables: Mapping[str, DataFrame]) -> dict[Hop, DataFrame]:
    """For every hop that ends a path into the target: the parent table's key
    with the flags of all cuts arriving through that hop."""
    # Walk each path from the source: the frame of (hop index k) is the parent
    # table of hop k with the flags of the cuts whose path's k-th hop this is.
    by_prefix: dict[tuple[Hop, ...], list[int]] = {}
    for i, cut in enumerate(cuts):
        by_prefix.setdefault(cut.hops, []).append(i)

    def parent_frame(hops: tuple[Hop, ...], cut_ids: list[int]) -> DataFrame:
        """The parent table of hops[-1] with flag columns for cut_ids (whose paths end with `hops`)."""
        hop = hops[-1]
        parent = tables[hop.parent_table]
        if len(hops) == 1:
            flags = [f"coalesce(({to_sql(cuts[i].source)}), FALSE) AS {_flag_name(i)}" for i in cut_ids]
            return parent.selectExpr(identifier(hop.parent_column), *flags)
        upstream = parent_frame(hops[:-1], cut_ids)
        previous = hops[-2]
        keyed = upstream.withColumnRenamed(previous.parent_column, "_pk")
        joined = parent.select(hop.parent_column, previous.child_column) \
            .join(keyed, F.col(previous.child_column) == F.col("_pk"), "left")
        return joined.selectExpr(identifier(hop.parent_column),
                                 *[f"coalesce({_flag_name(i)}, FALSE) AS {_flag_name(i)}" for i in cut_ids])

    frames: dict[Hop, DataFrame] = {}
    by_last: dict[Hop, list[tuple[tuple[Hop, ...], list[int]]]] = {}
    for hops, ids in by_prefix.items():
        by_last.setdefault(hops[-1], []).append((hops, ids))
    for last, groups in by_last.items():
        merged = None
        for hops, ids in groups:
            frame = parent_frame(hops, ids)
            merged = frame if merged is None else merged.join(frame, on=last.parent_column, how="full")
        frames[last] = merged
    return frames


def hops_with_duplicate_keys(tables: Mapping[str, DataFrame], hops) -> set[Hop]:
    """The hops whose parent key column holds some non-NULL value twice."""
    hops = set(hops)
    keys = {(hop.parent_table, hop.parent_column) for hop in hops}  # one check per key, however many hops reach it
    repeating = set()
    for table, column in sorted(keys):
        key = F.col(column)
        repeated = tables[table].where(key.isNotNull()).groupBy(key).count().where("count > 1")
        if repeated.limit(1).count():
            repeating.add((table, column))
    return {hop for hop in hops if (hop.parent_table, hop.parent_column) in repeating}


def literal_keys(tables: Mapping[str, DataFrame], cut: JoinInduced) -> BitMap64:
    """Key values of the last hop's parent that satisfy the cut (its materialized form),
    computed by the same joins as the cut's bits, from `tables` alone."""
    return literal_keys_of(tables, [cut])[0]


def literal_keys_of(tables: Mapping[str, DataFrame], cuts: Sequence[JoinInduced]) -> list[BitMap64]:
    """`literal_keys` of every cut, in their order: one Spark job per last hop (the cuts
    ending in one parent table share its rows), not one per cut."""
    frames = _propagate(list(cuts), tables) if cuts else {}
    by_last: dict[Hop, list[int]] = {}
    for i, cut in enumerate(cuts):
        by_last.setdefault(cut.hops[-1], []).append(i)
    keys: list[BitMap64] = [BitMap64() for _ in cuts]
    for hop in sorted(by_last, key=str):
        # a cut of another path into the same parent leaves NULL flags in the full join: FALSE
        flags = [f"coalesce({_flag_name(i)}, FALSE) AS {_flag_name(i)}" for i in by_last[hop]]
        # Every keyed parent row, the flags tested below: a filter OR-ing the flags sends
        # Spark's constraint propagation into time exponential in their number (25 cuts of
        # lineitem through supplier and nation never finished planning at SF 1).
        rows = (frames[hop].selectExpr(f"CAST({identifier(hop.parent_column)} AS BIGINT) AS _key", *flags)
                .where(F.col("_key").isNotNull())
                .toPandas())
        key = rows.iloc[:, 0].astype("int64").to_numpy()
        for column, i in enumerate(by_last[hop], start=1):
            held = key[rows.iloc[:, column].astype(bool).to_numpy()]
            keys[i] = BitMap64(held[held >= 0].tolist())
    return keys


def with_layout_cut_flags(df: DataFrame, cuts: Sequence, tables: Mapping[str, DataFrame]) -> DataFrame:
    """Flag columns `_cut0`, `_cut1`, ... in the order of `cuts`, a mix of simple
    and join-induced predicates (NULL counts as FALSE); `tables` holds the data
    of every table on the join-induced cuts' paths."""
    simple = [(i, c) for i, c in enumerate(cuts) if not isinstance(c, JoinInduced)]
    induced = [(i, c) for i, c in enumerate(cuts) if isinstance(c, JoinInduced)]
    with_simple = with_cut_flags(df, [to_sql(c) for _, c in simple])  # named _cut0.. in their own order
    with_both = with_induced_flags(with_simple, [c for _, c in induced], tables)
    flag_of = {i: f"_cut{k}" for k, (i, _) in enumerate(simple)}
    flag_of.update({i: with_both.columns[k] for k, (i, _) in enumerate(induced)})
    names = cut_flag_columns(len(cuts))
    return with_both.frame.selectExpr(*map(identifier, df.columns),
                                      *[f"{identifier(flag_of[i])} AS {names[i]}" for i in range(len(cuts))])


def cut_columns(df: DataFrame, cuts: Sequence, keep: Sequence[str]) -> DataFrame:
    """`df` narrowed to the columns `keep` and those the cuts read (a join-induced cut:
    its foreign key): `with_layout_cut_flags` then carries only these through its joins."""
    read = set().union(*(c.columns() for c in cuts)) - set(keep)
    return df.select(*keep, *[c for c in df.columns if c in read])
