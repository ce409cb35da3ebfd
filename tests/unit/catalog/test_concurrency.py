"""Writers and readers of one catalog at the same time (SQLite and PostgreSQL).

(a) Routers see exactly one consistent version while new versions are activated.
(b) Two runs of one (table, partition) that overlap: the first to activate wins,
    the other is refused (VersionSuperseded); no run undoes a layout it never saw.
(c) gc never deletes a folder that a route returned within the grace period.

Every layout here is made by hand: version k of `orders` has blocks whose
o_totalprice ranges are [0, 99], [100, 199], [200, 299], ..., so the query
`o_totalprice < 150` reads exactly its first two blocks, whatever the version.
"""

from __future__ import annotations

import collections
import datetime as dt
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from layout_core.base.schema import load_schema
from layout_core.catalog import BlockRecord, Catalog, VersionSuperseded
from layout_core.flows.gc import collect_garbage
from layout_core.predicates import value_to_json
from layout_core.skipping.router import RoutingIndex, route_query
from tests.unit.catalog.test_catalog import DIALECT_TYPES, make_first_release_catalog

SCHEMA = load_schema("tpch")
UTC = dt.timezone.utc
QUERY = "SELECT o_orderkey FROM orders WHERE o_totalprice < 150"  # blocks 0 and 1 of any version


def price_block(block_id: int, i: int, folder: Path, rows: int = 10) -> BlockRecord:
    """Block i of a version: o_totalprice in [100 i, 100 i + 99]."""
    stats = {"o_totalprice": {"min": value_to_json(100 * i), "max": value_to_json(100 * i + 99),
                              "null_count": 0}}
    return BlockRecord(block_id, rows, 100, str(folder / f"block_id={block_id}"), stats, 0, 0)


def make_folders(blocks: list[BlockRecord]) -> None:
    for b in blocks:
        Path(b.path).mkdir(parents=True, exist_ok=True)
        (Path(b.path) / "part-0.parquet").write_bytes(b"p" * 100)


def new_version(cat: Catalog, run_id: str, n_blocks: int, folder: Path,
                partition: str = "") -> tuple[int, list[BlockRecord]]:
    """begin_version + set_blocks (folders on disk) of a full layout; not activated."""
    version, ids = cat.begin_version("orders", partition, "handmade", {}, run_id, n_blocks)
    blocks = [price_block(b, i, folder) for i, b in enumerate(ids)]
    make_folders(blocks)
    cat.set_blocks(version, blocks)
    return version, blocks


def run_threads(n: int, work) -> list:
    """Run work(i) in n threads; re-raise the first error after all have ended."""
    results: list = [None] * n
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def url(catalog_url, tmp_path):
    with Catalog(catalog_url) as cat:
        cat.register_table("orders", str(tmp_path / "orders"))
    return catalog_url


# ---------------------------------------------------------------------- (a)


@pytest.mark.timeout(120)
def test_routers_see_one_whole_version_while_50_versions_are_activated(url, tmp_path):
    folder = tmp_path / "orders"
    versions: dict[int, list[int]] = {}  # every version ever activated -> its block ids, as written
    with Catalog(url) as writer:
        first, blocks = new_version(writer, "run-0", 4, folder)
        versions[first] = [b.block_id for b in blocks]
        writer.activate(first)

        done = threading.Event()

        def route_in_a_loop(_: int) -> tuple[int, int]:
            routes = inconsistent = 0
            with Catalog(url) as reader:  # one catalog (engine, connections) per thread
                while not done.is_set() or routes == 0:
                    route = route_query(QUERY, RoutingIndex.from_snapshot(reader.snapshot()), SCHEMA)
                    assert route.analyzed and not route.failure, route.warnings
                    (ref,) = route.refs
                    (part,) = ref.partitions  # one partition: exactly one version serves it
                    expected = versions.get(part.version_id)
                    # its two cheapest blocks and its own block count: nothing from another version
                    if expected is None or (list(part.blocks), part.blocks_total) != (expected[:2], len(expected)):
                        inconsistent += 1
                    routes += 1
            return routes, inconsistent

        def activate_50() -> None:
            try:
                for k in range(1, 51):
                    # 4, 5 or 6 blocks: a snapshot mixing two versions shows a wrong count
                    version, blocks = new_version(writer, f"run-{k}", 4 + k % 3, folder)
                    versions[version] = [b.block_id for b in blocks]  # known before it can be seen
                    writer.activate(version)
            finally:
                done.set()

        activator = threading.Thread(target=activate_50)
        activator.start()
        results = run_threads(8, route_in_a_loop)
        activator.join()
        assert writer.active_layout("orders", "").version.version_id == max(versions)
    routes = sum(r for r, _ in results)
    inconsistent = sum(i for _, i in results)
    print(f"\n(a) {sa.make_url(url).get_backend_name()}: 50 activations, {routes} routes by 8 threads, "
          f"{inconsistent} inconsistent")
    assert inconsistent == 0
    assert all(r > 0 for r, _ in results)


def test_a_snapshot_ignores_a_version_activated_between_its_statements(url, tmp_path):
    """An activation commits after the snapshot's first read of layout_versions: the
    snapshot still shows the old version whole (on PostgreSQL only REPEATABLE READ
    gives that; on SQLite the activation waits for the read transaction)."""
    folder = tmp_path / "orders"
    with Catalog(url) as cat, Catalog(url) as other:
        old, old_blocks = new_version(cat, "run-1", 4, folder)
        cat.activate(old)
        new, _ = new_version(other, "run-2", 5, folder)
        me = threading.get_ident()
        activation: list[threading.Thread] = []

        def after_execute(conn, cursor, statement, *args):
            if threading.get_ident() == me and not activation and "layout_versions" in statement:
                thread = threading.Thread(target=other.activate, args=(new,))
                activation.append(thread)
                thread.start()
                thread.join(timeout=1)  # PostgreSQL commits at once; SQLite waits for our lock

        sa.event.listen(sa.engine.Engine, "after_cursor_execute", after_execute)
        try:
            snapshot = cat.snapshot()
        finally:
            sa.event.remove(sa.engine.Engine, "after_cursor_execute", after_execute)
        activation[0].join(timeout=60)
        (layout,) = snapshot.layouts.values()
        assert layout.version.version_id == old
        assert [b.block_id for b in layout.blocks] == [b.block_id for b in old_blocks]
        assert cat.active_layout("orders", "").version.version_id == new  # it did commit


# ---------------------------------------------------------------------- (b)


ROUNDS = 20


@pytest.mark.timeout(120)
def test_two_runs_started_together_one_activates_the_other_is_refused(url, tmp_path):
    folder = tmp_path / "orders"
    with Catalog(url) as cat:
        v0, _ = new_version(cat, "run-0", 2, folder)
        cat.activate(v0)
    start, begun = threading.Barrier(2), threading.Barrier(2)

    def nightly_run(i: int) -> list[tuple[int, str]]:
        """ROUNDS runs, each overlapping the other thread's run of the same round."""
        outcomes = []
        with Catalog(url) as c:
            for r in range(ROUNDS):
                start.wait()
                version, ids = c.begin_version("orders", "", "handmade", {}, f"round-{r}-run-{i}", 3)
                begun.wait()  # both runs began from the same active version
                blocks = [price_block(b, k, folder) for k, b in enumerate(ids)]
                c.set_blocks(version, blocks)
                try:
                    c.activate(version, input_fingerprint=f"{r}")
                    outcomes.append((version, "activated"))
                except VersionSuperseded:
                    c.fail(version, "lost the race")  # as update_catalog does
                    outcomes.append((version, "refused"))
        return outcomes

    per_thread = run_threads(2, nightly_run)
    with Catalog(url) as cat:
        history = {v.version_id: v for v in cat.versions("orders")}
        serving = v0
        for r in range(ROUNDS):
            (a, out_a), (b, out_b) = per_thread[0][r], per_thread[1][r]
            assert sorted([out_a, out_b]) == ["activated", "refused"], f"round {r}"
            winner, loser = (a, b) if out_a == "activated" else (b, a)
            # both began from the previous winner; the winner retired exactly it
            assert history[winner].replaces == history[loser].replaces == serving
            assert history[loser].state == "failed" and history[loser].activated_at is None
            serving = winner
        print(f"\n(b) {sa.make_url(url).get_backend_name()}: {ROUNDS} rounds of two overlapping runs, "
              f"{ROUNDS} activated, {ROUNDS} refused")
        assert [v for v in history.values() if v.state == "active"] == [history[serving]]
        # every activation retired the version its run began from, never a newer one
        activated = [v for v in history.values() if v.activated_at]
        assert len({v.replaces for v in activated}) == len(activated)


@pytest.mark.timeout(120)
def test_runs_that_may_or_may_not_overlap_never_undo_a_newer_layout(url, tmp_path):
    """No barrier between begin and activate: rounds overlap or not by chance; either
    way a version only ever replaces the one its run began from."""
    folder = tmp_path / "orders"
    with Catalog(url) as cat:
        v0, _ = new_version(cat, "run-0", 2, folder)
        cat.activate(v0)
    start = threading.Barrier(2)

    def run(i: int) -> list[str]:
        outcomes = []
        with Catalog(url) as c:
            for r in range(ROUNDS):
                start.wait()
                version, _ = new_version(c, f"round-{r}-run-{i}", 2, folder)
                try:
                    c.activate(version)
                    outcomes.append("activated")
                except VersionSuperseded:
                    outcomes.append("refused")
        return outcomes

    per_thread = run_threads(2, run)
    with Catalog(url) as cat:
        history = cat.versions("orders")
    activated = [v for v in history if v.activated_at is not None]
    refused = sum(o == "refused" for outcomes in per_thread for o in outcomes)
    assert len(activated) + refused == 2 * ROUNDS + 1
    assert sum(v.state == "active" for v in history) == 1
    assert len({v.replaces for v in activated}) == len(activated)
    # the activations form one chain from v0: each retired the one before it
    by_time = sorted(activated, key=lambda v: (v.activated_at, v.version_id))
    assert [v.replaces for v in by_time] == [None] + [v.version_id for v in by_time[:-1]]


def test_a_retry_of_the_refused_run_is_refused_again_and_a_later_run_goes_live(url, tmp_path):
    folder = tmp_path / "orders"
    with Catalog(url) as cat:
        v0, _ = new_version(cat, "night-1", 2, folder)
        cat.activate(v0)
        slow, _ = new_version(cat, "night-2", 2, folder)  # began while v0 served
        fast, _ = new_version(cat, "night-2__rerun1", 2, folder)
        cat.activate(fast)
        with pytest.raises(VersionSuperseded, match=f"began when version {v0} served .* version {fast} serves"):
            cat.activate(slow)
        cat.fail(slow, "lost the race")
        assert cat.begin_version("orders", "", "handmade", {}, "night-2", 2)[0] == slow  # a retry resumes it
        with pytest.raises(VersionSuperseded):
            cat.activate(slow)
        later, _ = new_version(cat, "night-3", 2, folder)  # began after fast went live
        cat.activate(later)
        assert cat.version(later).replaces == fast
        assert cat.version(slow).state == "building" and cat.version(fast).state == "retired"


def test_an_unfinished_version_of_an_old_catalog_may_replace_the_version_serving_now(catalog_url):
    """Versions begun before base_version_id existed take the serving version as their base."""
    make_first_release_catalog(catalog_url)  # orders has version 1 active, block ids 0..1 used
    engine = sa.create_engine(catalog_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id, "
            "n_blocks, first_block_id, created_at) VALUES ('orders', '', 'building', 'greedy', '{}', "
            f"'run-2', 1, 2, {DIALECT_TYPES[engine.dialect.name]['t0']})")
    engine.dispose()
    with Catalog(catalog_url) as cat:
        (old, building) = cat.versions("orders")
        assert building.state == "building" and building.replaces == old.version_id
        cat.activate(building.version_id)
        assert cat.version(building.version_id).replaces == old.version_id


# ---------------------------------------------------------------------- (c)


T0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
HOUR = dt.timedelta(hours=1)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def test_gc_keeps_a_folder_shared_with_a_version_retired_within_the_grace_period(url, tmp_path):
    """full (3 blocks) -> reorg sharing full's blocks 0 and 1 -> full again. Right after the
    last switch a route from the reorg's snapshot names full's folders 0 and 1: they stay
    while the reorg is within the grace period, even though full itself is due."""
    folder = tmp_path / "orders"
    clock = Clock()
    with Catalog(url, clock=clock) as cat:
        clock.now = T0
        full, full_blocks = new_version(cat, "night-1", 3, folder)
        cat.activate(full)
        clock.now = T0 + 10 * HOUR
        reorg, (new_id,) = cat.begin_version("orders", "", "handmade", {}, "reorg-1", 1)
        fresh = price_block(new_id, 2, folder)
        make_folders([fresh])
        cat.set_blocks(reorg, [*full_blocks[:2], fresh], replaces=full)
        cat.activate(reorg, replaces=full)  # full retired at T0+10h
        clock.now = T0 + 20 * HOUR
        again, _ = new_version(cat, "night-2", 3, folder)
        cat.activate(again)  # reorg retired at T0+20h

        report = collect_garbage(cat, tmp_path, dt.timedelta(hours=4), now=T0 + 21 * HOUR)
        assert report.versions_purged == (full,)  # retired 11 h ago; reorg only 1 h ago
        assert [Path(b.path).is_dir() for b in full_blocks] == [True, True, False]
        assert Path(fresh.path).is_dir()


def test_gc_purges_a_refused_run_after_the_grace_period_even_if_it_is_newer(url, tmp_path):
    """A version refused because another run went live can never serve: its folders go
    after the grace period like a retired version's (not kept as 'may be retried')."""
    folder = tmp_path / "orders"
    clock = Clock()
    with Catalog(url, clock=clock) as cat:
        first, _ = new_version(cat, "night-1", 2, folder)
        second, _ = new_version(cat, "night-1__rerun1", 2, folder)  # both began with nothing serving
        cat.activate(first)
        with pytest.raises(VersionSuperseded):
            cat.activate(second)
        cat.fail(second, "lost the race")
        retried = cat.begin_version("orders", "", "handmade", {}, "night-2", 2)[0]
        cat.fail(retried, "verify failed")  # began from `first`: may still be retried, kept

        within = collect_garbage(cat, tmp_path, dt.timedelta(hours=4), now=T0 + HOUR)
        assert within.versions_purged == ()
        later = collect_garbage(cat, tmp_path, dt.timedelta(hours=4), now=T0 + 5 * HOUR)
        assert later.versions_purged == (second,)
        assert cat.version(retried).state == "failed"
        assert sorted(p.name for p in folder.iterdir()) == ["block_id=0", "block_id=1"]  # first's


GRACE = dt.timedelta(seconds=0.5)
CYCLES = 5


@pytest.mark.timeout(120)
def test_gc_during_routing_never_deletes_a_folder_a_route_returned_within_the_grace_period(url, tmp_path):
    """Real clock. Each cycle: a full layout, a reorganization sharing its blocks 0 and 1
    (the ones QUERY reads), a pause longer than the grace, then the next full layout and
    a gc at once. 4 router threads keep every route of the last grace period and check,
    again and again, that the folders it named still exist."""
    folder = tmp_path / "orders"
    margin = GRACE * 0.6  # a route is checked while younger than this: no timing doubt
    done = threading.Event()
    purged: list[int] = []

    def route_and_check(_: int) -> tuple[int, int, int]:
        recent: collections.deque = collections.deque()  # (taken at, folders it names)
        routes = checks = missing = 0
        with Catalog(url) as reader:
            while not done.is_set():
                taken = dt.datetime.now(UTC)  # before the snapshot: the route is at least this old
                snapshot = reader.snapshot()
                route = route_query(QUERY, RoutingIndex.from_snapshot(snapshot), SCHEMA)
                paths = {b.block_id: b.path for layout in snapshot.layouts.values() for b in layout.blocks}
                recent.append((taken, [paths[b] for b in route.refs[0].blocks]))
                routes += 1
                now = dt.datetime.now(UTC)
                while recent and now - recent[0][0] >= margin:
                    recent.popleft()
                for _, named in recent:
                    checks += 1
                    missing += sum(not Path(p).is_dir() for p in named)
        return routes, checks, missing

    def cycles() -> None:
        try:
            with Catalog(url) as writer:
                for k in range(CYCLES):
                    full, blocks = new_version(writer, f"night-{k}", 3, folder)
                    writer.activate(full)
                    gc = collect_garbage(writer, tmp_path, GRACE)
                    purged.extend(gc.versions_purged)
                    reorg, (new_id,) = writer.begin_version("orders", "", "handmade", {}, f"reorg-{k}", 1)
                    fresh = price_block(new_id, 2, folder)
                    make_folders([fresh])
                    writer.set_blocks(reorg, [*blocks[:2], fresh], replaces=full)
                    writer.activate(reorg, replaces=full)
                    time.sleep((GRACE * 1.5).total_seconds())  # `full` is now out of service for > GRACE
        finally:
            done.set()

    with Catalog(url) as cat:
        first, _ = new_version(cat, "night-start", 3, folder)
        cat.activate(first)
    writer = threading.Thread(target=cycles)
    writer.start()
    results = run_threads(4, route_and_check)
    writer.join()
    routes, checks, missing = (sum(r[i] for r in results) for i in range(3))
    print(f"\n(c) {sa.make_url(url).get_backend_name()}: {CYCLES} cycles, {len(purged)} versions purged, "
          f"{routes} routes, {checks} folder checks within the grace, {missing} missing")
    assert purged  # gc did delete: the check is not vacuous
    assert missing == 0
