"""Z-order / Hilbert keys (numpy) and the Spark curve-layout baseline."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.curves import hilbert_keys, rank_coordinates, zorder_keys


def grid(k: int, bits: int) -> np.ndarray:
    """All cells of the k-dimensional grid [0, 2^bits)^k, shape (2^(k*bits), k)."""
    return np.array(list(itertools.product(range(1 << bits), repeat=k)), dtype=np.uint64).reshape(-1, k)


def visiting_order(keys_fn, k: int, bits: int) -> list[tuple[int, ...]]:
    cells = grid(k, bits)
    keys = keys_fn(cells, bits)
    return [tuple(int(v) for v in c) for c in cells[np.argsort(keys, kind="stable")]]


def assert_hilbert_walk(k: int, bits: int) -> None:
    cells = grid(k, bits)
    keys = hilbert_keys(cells, bits)
    assert keys.dtype == np.uint64
    assert sorted(keys.tolist()) == list(range(1 << (k * bits)))  # a permutation
    walk = cells[np.argsort(keys)].astype(np.int64)
    steps = np.abs(np.diff(walk, axis=0)).sum(axis=1)
    assert (steps == 1).all()  # consecutive cells are adjacent
    assert not walk[0].any()  # starts at the origin


def deinterleave(key: int, k: int, bits: int) -> tuple[int, ...]:
    """Reference (per row, pure Python) inverse of the documented z-order bit layout."""
    coords = [0] * k
    pos = k * bits - 1
    for b in range(bits - 1, -1, -1):
        for i in range(k):
            coords[i] |= ((key >> pos) & 1) << b
            pos -= 1
    return tuple(coords)


# ---------------------------------------------------------------- z-order, by hand


def test_zorder_2d_bits1_by_hand():
    keys = zorder_keys(np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=np.uint32), 1)
    assert keys.dtype == np.uint64
    # dimension 0 (x) is the more significant bit of each pair
    assert keys.tolist() == [2, 1, 3, 0]


def test_zorder_2d_bits2_by_hand():
    # x=2=0b10, y=1=0b01 -> bits x1 y1 x0 y0 = 1 0 0 1 = 9
    coords = np.array([[2, 1], [1, 2], [3, 3], [3, 0], [0, 3], [1, 1]], dtype=np.uint8)
    assert zorder_keys(coords, 2).tolist() == [9, 6, 15, 10, 5, 3]
    assert visiting_order(zorder_keys, 2, 2)[:8] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]


def test_zorder_3d_by_hand():
    coords = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.uint64)
    assert zorder_keys(coords, 1).tolist() == [4, 2, 1, 7]
    # (x=3, y=0, z=2) with 2 bits: x1 y1 z1 x0 y0 z0 = 1 0 1 1 0 0 = 44
    assert zorder_keys(np.array([[3, 0, 2]]), 2).tolist() == [44]


def test_zorder_one_dimension_is_identity():
    values = np.arange(256, dtype=np.uint64).reshape(-1, 1)
    assert zorder_keys(values, 8).tolist() == list(range(256))
    assert hilbert_keys(values, 8).tolist() == list(range(256))


def test_full_64_bit_keys():
    top = np.array([[2**32 - 1, 2**32 - 1], [2**32 - 1, 0], [0, 2**32 - 1]], dtype=np.uint64)
    assert zorder_keys(top, 32).tolist() == [2**64 - 1, int("10" * 32, 2), int("01" * 32, 2)]
    assert hilbert_keys(top, 32).dtype == np.uint64


@pytest.mark.parametrize("fn", [zorder_keys, hilbert_keys])
def test_argument_checks(fn):
    with pytest.raises(ValueError):
        fn(np.zeros((3, 5), dtype=np.uint64), 13)  # 65 bits
    with pytest.raises(ValueError):
        fn(np.array([[4, 0]]), 2)  # out of range
    with pytest.raises(ValueError):
        fn(np.array([[-1, 0]]), 2)  # negative
    with pytest.raises(ValueError):
        fn(np.zeros(3, dtype=np.uint64), 2)  # not (n, k)
    with pytest.raises(ValueError):
        fn(np.zeros((3, 2), dtype=np.uint64), 0)
    with pytest.raises(TypeError):
        fn(np.zeros((3, 2), dtype=np.float64), 2)
    assert fn(np.zeros((0, 2), dtype=np.uint64), 4).shape == (0,)


# ---------------------------------------------------------------- Hilbert, by hand


def test_hilbert_2d_bits1_by_hand():
    # bits=1 is the reflected Gray code: 00, 01, 11, 10
    assert visiting_order(hilbert_keys, 2, 1) == [(0, 0), (0, 1), (1, 1), (1, 0)]


def test_hilbert_2d_bits2_visiting_order_by_hand():
    # The order-2 Hilbert curve, starting at the origin and ending at (3, 0):
    #
    #   y=3   5 - 6   9 -10
    #         |   |   |   |
    #   y=2   4   7 - 8  11
    #         |           |
    #   y=1   3 - 2  13 -12
    #             |   |
    #   y=0   0 - 1  14 -15
    #        x=0 x=1 x=2 x=3
    expected = [(0, 0), (1, 0), (1, 1), (0, 1),
                (0, 2), (0, 3), (1, 3), (1, 2),
                (2, 2), (2, 3), (3, 3), (3, 2),
                (3, 1), (2, 1), (2, 0), (3, 0)]
    assert visiting_order(hilbert_keys, 2, 2) == expected
    assert_hilbert_walk(2, 2)


def test_hilbert_3d_bits1_by_hand():
    # the 3-bit reflected Gray code
    assert visiting_order(hilbert_keys, 3, 1) == [
        (0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 1, 0), (1, 1, 0), (1, 1, 1), (1, 0, 1), (1, 0, 0)]


def test_hilbert_3d_bits2_is_an_adjacent_walk():
    assert_hilbert_walk(3, 2)


@pytest.mark.parametrize("k,bits", [(2, 5), (2, 6), (3, 3), (3, 4), (4, 2), (4, 3), (5, 2), (6, 2)])
def test_hilbert_larger_grids_are_adjacent_walks(k, bits):
    assert_hilbert_walk(k, bits)


# ---------------------------------------------------------------- properties

small_grids = st.tuples(st.integers(1, 4), st.integers(1, 4)).filter(lambda kb: kb[0] * kb[1] <= 12)


@settings(max_examples=40, deadline=None)
@given(small_grids)
def test_keys_are_bijections_on_small_grids(kb):
    k, bits = kb
    cells = grid(k, bits)
    everything = list(range(1 << (k * bits)))
    assert sorted(zorder_keys(cells, bits).tolist()) == everything
    assert sorted(hilbert_keys(cells, bits).tolist()) == everything


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([2, 3]), st.integers(1, 4))
def test_hilbert_locality(k, bits):
    """Cells with consecutive Hilbert keys are always at Manhattan distance 1."""
    cells = grid(k, bits)
    walk = cells[np.argsort(hilbert_keys(cells, bits))].astype(np.int64)
    assert (np.abs(np.diff(walk, axis=0)).sum(axis=1) == 1).all()


@st.composite
def coordinate_arrays(draw):
    k = draw(st.integers(1, 6))
    bits = draw(st.integers(1, 64 // k))
    n = draw(st.integers(0, 40))
    flat = draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=n * k, max_size=n * k))
    return np.array(flat, dtype=np.uint64).reshape(n, k), bits


@settings(max_examples=150, deadline=None)
@given(coordinate_arrays())
def test_zorder_matches_reference_deinterleave(case):
    coords, bits = case
    n, k = coords.shape
    keys = zorder_keys(coords, bits)
    assert [deinterleave(int(key), k, bits) for key in keys] == [tuple(int(v) for v in row) for row in coords]


@settings(max_examples=150, deadline=None)
@given(coordinate_arrays())
def test_hilbert_injective_and_nested(case):
    """Distinct cells get distinct keys, and the curve of order bits coarsened by one bit
    (key >> k) is the curve of order bits - 1 on the parent cells."""
    coords, bits = case
    n, k = coords.shape
    keys = hilbert_keys(coords, bits)
    assert keys.shape == (n,)
    distinct_cells = {tuple(row) for row in coords.tolist()}
    assert len(set(keys.tolist())) == len(distinct_cells)
    if bits > 1:
        parents = hilbert_keys(coords >> np.uint64(1), bits - 1)
        assert (keys >> np.uint64(k)).tolist() == parents.tolist()


@settings(max_examples=100, deadline=None)
@given(coordinate_arrays())
def test_keys_do_not_depend_on_batching_or_dtype(case):
    coords, bits = case
    n = coords.shape[0]
    for fn in (zorder_keys, hilbert_keys):
        whole = fn(coords, bits)
        halves = np.concatenate([fn(coords[: n // 2], bits), fn(coords[n // 2:], bits)])
        assert whole.tolist() == halves.tolist()
        if bits <= 62:
            assert fn(coords.astype(np.int64), bits).tolist() == whole.tolist()


# ---------------------------------------------------------------- rank_coordinates


def test_rank_coordinates_by_hand():
    # m=4 non-NULL values; R(1)=2, R(2)=3, R(3)=4; coordinate = min(R*4//4, 3)
    assert rank_coordinates(np.array([3.0, np.nan, 1, 1, 2]), 2).tolist() == [3, 0, 2, 2, 3]
    assert rank_coordinates(np.array(["b", None, "a", "a", "c"], dtype=object), 2).tolist() == [3, 0, 2, 2, 3]
    assert rank_coordinates(np.arange(16), 4).tolist() == list(range(1, 16)) + [15]
    assert rank_coordinates(np.array([None, None], dtype=object), 3).tolist() == [0, 0]
    assert rank_coordinates(np.array([], dtype=float), 3).tolist() == []
    dates = np.array([dt.date(2024, 1, 2), None, dt.date(2023, 5, 1)], dtype=object)
    assert rank_coordinates(dates, 1).tolist() == [1, 0, 1]
    assert rank_coordinates(np.array([Decimal("1.5"), Decimal("-2")], dtype=object), 1).tolist() == [1, 1]


def test_rank_coordinates_spread_skewed_values():
    # 90% zeros, then 10 distinct values: the tail still spreads over the upper range
    values = np.concatenate([np.zeros(90), np.arange(1, 11) * 1e9])
    coords = rank_coordinates(values, 8)
    assert set(coords[:90].tolist()) == {230}
    assert coords[90:].tolist() == sorted(set(coords[90:].tolist()))
    assert coords.max() == 255


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-5, 5), st.floats(-1e6, 1e6), st.just(float("nan"))), max_size=50),
       st.integers(1, 63))
def test_rank_coordinates_properties(values, bits):
    arr = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    coords = rank_coordinates(arr, bits)
    assert coords.dtype == np.uint64 and coords.shape == arr.shape
    present = ~np.isnan(arr)
    assert (coords[~present] == 0).all()
    assert all(int(c) < 1 << bits for c in coords.tolist())
    v, c = arr[present], coords[present]
    order = np.argsort(v, kind="stable")
    assert (np.diff(c[order].astype(np.float64)) >= 0).all()  # monotone
    for x in set(v.tolist()):  # ties share a coordinate
        assert len(set(c[v == x].tolist())) == 1
    if present.any():  # the largest value gets the top cell
        assert int(c[v == v.max()][0]) == (1 << bits) - 1
    # the same values as an object array with None give the same coordinates
    obj = np.array([None if np.isnan(x) else x for x in arr], dtype=object)
    assert rank_coordinates(obj, bits).tolist() == coords.tolist()


# ---------------------------------------------------------------- Spark


def _mixed_rows(n: int = 120):
    rows = []
    for i in range(n):
        rows.append((
            i,
            None if i % 5 == 0 else i % 7,  # int with NULLs and heavy repeats
            None if i % 11 == 3 else dt.date(2020, 1, 1) + dt.timedelta(days=(i * 37) % 19),
            None if i % 13 == 4 else Decimal(i % 9) / 4 - 1,  # decimal(10, 2)
            None if i % 6 == 1 else f"s{(i * 7) % 23:02d}é",
            float("nan") if i % 10 == 7 else (None if i % 10 == 8 else (i % 17) * 1.25),
        ))
    return rows


_SCHEMA = "id int, a int, d date, dec decimal(10,2), s string, f double"
_COLUMNS = ["a", "d", "dec", "s", "f"]


@pytest.fixture(scope="module")
def mixed_df(spark):
    return spark.createDataFrame(_mixed_rows(), _SCHEMA).cache()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zorder", "hilbert"])
def test_with_curve_key_mixed_types(spark, mixed_df, kind):
    from layout_core.spark.curves import curve_coordinate_columns, with_curve_key

    bits = 12
    out = with_curve_key(mixed_df, _COLUMNS, kind, bits=bits, keep_coordinates=True)
    assert dict(out.dtypes)["_curve"] == "bigint"
    assert out.columns == mixed_df.columns + curve_coordinate_columns(5) + ["_curve"]
    rows = out.collect()
    assert len(rows) == mixed_df.count()
    coord_names = curve_coordinate_columns(5)
    coords = np.array([[r[c] for c in coord_names] for r in rows], dtype=np.int64)
    keys = np.array([r["_curve"] for r in rows], dtype=np.int64)
    assert (coords >= 0).all() and (coords < 1 << bits).all()
    # NULL / NaN -> coordinate 0
    for name, coord in zip(_COLUMNS, coord_names):
        for r in rows:
            v = r[name]
            if v is None or (isinstance(v, float) and np.isnan(v)):
                assert r[coord] == 0, (name, r)
    # equal coordinates <=> equal keys, and the key is the numpy key (k*bits = 60 <= 63)
    by_coords: dict[tuple, set] = {}
    for c, key in zip(map(tuple, coords.tolist()), keys.tolist()):
        by_coords.setdefault(c, set()).add(key)
    assert all(len(ks) == 1 for ks in by_coords.values())
    assert len(set(keys.tolist())) == len(by_coords)
    fn = zorder_keys if kind == "zorder" else hilbert_keys
    assert keys.tolist() == fn(coords.astype(np.uint64), bits).astype(np.int64).tolist()
    # rows with equal values in the chosen columns get equal keys
    by_values: dict[tuple, set] = {}
    for r in rows:
        by_values.setdefault(tuple(str(r[c]) for c in _COLUMNS), set()).add(r["_curve"])
    assert all(len(ks) == 1 for ks in by_values.values())


@pytest.mark.slow
def test_coordinates_match_rank_coordinates_with_exact_quantiles(spark, mixed_df):
    from layout_core.spark.curves import with_curve_coordinates

    bits = 4
    columns = ["id", *_COLUMNS]
    out = with_curve_coordinates(mixed_df, columns, bits, quantile_bits=bits, relative_error=0.0).collect()
    for i, name in enumerate(columns):
        values = np.array([r[name] for r in out], dtype=object)
        assert [r[f"_coord{i}"] for r in out] == rank_coordinates(values, bits).tolist(), name


@pytest.mark.slow
def test_coarse_quantiles_and_long_string_path(spark, mixed_df):
    from layout_core.spark.curves import with_curve_coordinates

    # 16 bits per coordinate but 2^3 cells per column: cells shifted to the top bits;
    # strings through the 6-byte prefix + approxQuantile path (max_distinct=0)
    out = with_curve_coordinates(mixed_df, ["s", "a"], 16, quantile_bits=3, max_distinct=0).collect()
    for i, name in enumerate(["s", "a"]):
        pairs = [(r[name], r[f"_coord{i}"]) for r in out]
        assert all(c == 0 for v, c in pairs if v is None)
        present = sorted((v, c) for v, c in pairs if v is not None)
        cs = [c for _, c in present]
        assert cs == sorted(cs)  # order preserving
        assert all(c % (1 << 13) == 0 and 0 <= c < 1 << 16 for c in cs)
        assert len(set(cs)) >= 4  # spread over several cells
        assert cs[-1] == (1 << 16) - (1 << 13)  # the top cell is used


@pytest.mark.slow
def test_with_curve_key_64_bit_keys_keep_order(spark):
    from layout_core.spark.curves import with_curve_key

    df = spark.createDataFrame([(i, (i * 7) % 64) for i in range(64)], "x int, y int")
    rows = with_curve_key(df, ["x", "y"], "zorder", bits=32, quantile_bits=6, relative_error=0.0,
                          keep_coordinates=True).collect()
    coords = np.array([[r["_coord0"], r["_coord1"]] for r in rows], dtype=np.uint64)
    unsigned = zorder_keys(coords, 32)
    signed = np.array([r["_curve"] for r in rows], dtype=np.int64)
    assert np.argsort(unsigned, kind="stable").tolist() == np.argsort(signed, kind="stable").tolist()
    assert (signed.view(np.uint64) ^ np.uint64(1 << 63)).tolist() == unsigned.tolist()


@pytest.mark.slow
def test_with_curve_key_argument_checks(spark, mixed_df):
    from layout_core.spark.curves import curve_block_index, with_curve_key

    with pytest.raises(ValueError):
        with_curve_key(mixed_df, ["a"], "peano")
    with pytest.raises(ValueError):
        with_curve_key(mixed_df, ["a", "d", "dec", "s", "f"], "zorder", bits=16)  # 80 bits
    with pytest.raises(ValueError):
        with_curve_key(mixed_df, ["nope"], "zorder")
    with pytest.raises(ValueError):
        with_curve_key(mixed_df, [], "zorder")
    with pytest.raises(ValueError):
        curve_block_index(mixed_df, 10)  # no _curve
    with pytest.raises(TypeError):
        with_curve_key(spark.createDataFrame([({"a": 1},)], "m map<string,int>"), ["m"], "zorder")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zorder", "hilbert"])
def test_curve_block_index_equal_size_blocks(spark, mixed_df, kind):
    from layout_core.spark.curves import curve_block_index, with_curve_key

    keyed = with_curve_key(mixed_df, ["a", "s", "f"], kind, bits=8)
    blocks = curve_block_index(keyed, 25)
    rows = blocks.collect()
    sizes = {}
    for r in rows:
        sizes[r["_block"]] = sizes.get(r["_block"], 0) + 1
    assert sorted(sizes) == [0, 1, 2, 3, 4]
    assert [sizes[b] for b in range(5)] == [25, 25, 25, 25, 20]
    # blocks are contiguous ranges of the curve key
    spans = {b: (min(r["_curve"] for r in rows if r["_block"] == b), max(r["_curve"] for r in rows if r["_block"] == b))
             for b in sizes}
    assert all(spans[b][1] <= spans[b + 1][0] for b in range(4))
    # deterministic (ties broken by a hash of all columns and the columns themselves)
    again = {r["id"]: r["_block"] for r in curve_block_index(keyed, 25).collect()}
    assert again == {r["id"]: r["_block"] for r in rows}
