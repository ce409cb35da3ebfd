"""The `layout` command line, used as a user would."""

import json

import pytest

from layout_core.catalog import BlockRecord, Catalog
from layout_core.cli import main
from layout_core.predicates import value_to_json


def test_help_of_every_command(capsys):
    for argv in (["--help"], ["tpch", "generate", "--help"], ["workload", "tpch", "--help"],
                 ["workload", "analyze", "--help"], ["route", "--help"], ["rewrite", "--help"], ["explain", "--help"],
                 ["dag-test", "--help"],
                 ["run-workload", "--help"], ["demo", "--help"], ["bench", "sun", "--help"],
                 ["catalog", "show", "--help"], ["optimizers", "--help"], ["bench", "tpch", "--help"],
                 ["bench", "trips", "--help"], ["trips", "generate", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
        assert "usage: layout" in capsys.readouterr().out


def test_version_and_exit_codes(tmp_path, capsys):
    """0: done (and --version); 1: the user's mistake, one line; 2: a usage error (argparse)."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == "layout 0.1.0"
    assert main(["workload", "analyze", str(tmp_path / "nope.sql")]) == 1
    with pytest.raises(SystemExit) as done:
        main(["route"])  # no SQL
    assert done.value.code == 2 and "the following arguments are required" in capsys.readouterr().err


def test_tpch_generate_writes_eight_tables(tmp_path, capsys):
    assert main(["tpch", "generate", "--sf", "0.01", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == sorted(
        f"{t}.parquet" for t in ("region", "nation", "supplier", "customer", "part", "partsupp",
                                 "orders", "lineitem"))
    import pyarrow.parquet as pq

    assert pq.read_metadata(tmp_path / "nation.parquet").num_rows == 25
    assert pq.read_metadata(tmp_path / "lineitem.parquet").num_rows == 60175  # TPC-H SF 0.01


def test_b1_on_skewed_data_refuses_bad_settings_before_it_starts(tmp_path, caplog):
    work = tmp_path / "b1"
    for bad, said in ((["--skew", "-1"], "--skew must be a Zipf factor > 0, not -1"),
                      (["--skew", "2", "--skew-mode", "sorted"], "unknown skew mode 'sorted': use one of runs, iid")):
        caplog.clear()
        assert main(["bench", "tpch", "--sf", "0.01", "--work", str(work), *bad]) != 0
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [said]
    assert not work.exists()


def test_workload_generate_and_analyze_json(tmp_path, capsys):
    out = tmp_path / "q.sql"
    assert main(["workload", "tpch", "--per-template", "2", "--seed", "1", "--templates", "3,6",
                 "--skew", "3", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.count("-- tpch q3 instance") == 2 and text.count("-- tpch q6 instance") == 2
    with out.open("a") as f:
        f.write("SELEC garbage;\nSELECT * FROM nowhere;\n")
    capsys.readouterr()
    assert main(["workload", "analyze", str(out), "--schema", "tpch", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queries"] == 6 and report["parsed"] == 4
    assert [f["index"] for f in report["failed"]] == [4, 5]
    assert "unknown table 'nowhere'" in report["failed"][1]["error"]
    assert set(report["tables"]) == {"customer", "orders", "lineitem"}
    q6_cut = [p for p in report["tables"]["lineitem"]["predicates"] if p["sql"].startswith("l_quantity <")]
    assert q6_cut and all(p["count"] >= 1 for p in q6_cut)
    induced = report["tables"]["lineitem"]["join_induced_cuts"]
    assert any(c["path"] == ["orders.o_orderkey->lineitem.l_orderkey"] for c in induced)
    assert any(c["path"] == ["customer.c_custkey->orders.o_custkey", "orders.o_orderkey->lineitem.l_orderkey"]
               and "c_mktsegment" in c["sql"] for c in induced)


@pytest.mark.parametrize("command, output", [(["workload", "tpch"], "--out"), (["bench", "tpch"], "--work")])
def test_bad_template_list_is_a_usage_error(tmp_path, capsys, command, output):
    with pytest.raises(SystemExit) as done:
        main([*command, "--templates", "3,23", output, str(tmp_path / "out")])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "TPC-H templates here are 1, 2, 3," in err and "21, 22; not [23]" in err
    assert not (tmp_path / "out").exists()


def test_missing_query_log_is_one_clear_line(tmp_path, caplog):
    assert main(["workload", "analyze", str(tmp_path / "nope.sql")]) == 1
    assert any("nope.sql" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


def test_optimizers_lists_the_registry_with_settings(capsys):
    assert main(["optimizers"]) == 0
    out = capsys.readouterr().out
    for name in ("fineblock", "sortkey", "qdtree", "mto", "zorder", "hilbert"):
        assert f"\n{name}: " in f"\n{out}"
    assert "sample_rows (int, default 150000)" in out and "block_rows (int, default 50000)" in out


def test_a_bug_keeps_its_traceback_while_a_user_mistake_is_one_line(monkeypatch, caplog):
    import layout_core.cli as cli

    def broken(args):
        raise RuntimeError("an internal invariant broke")

    monkeypatch.setattr(cli, "cmd_optimizers", broken)
    with pytest.raises(RuntimeError, match="an internal invariant broke"):
        main(["optimizers"])


@pytest.fixture
def catalog_env(orders_catalog):
    _, _, b1, b2 = orders_catalog
    return b1, b2


def test_route_and_rewrite(catalog_env, capsys):
    b1, b2 = catalog_env
    sql = "SELECT count(*) FROM orders o WHERE o.o_totalprice > 150"
    assert main(["route", sql, "--json"]) == 0
    (ref,) = json.loads(capsys.readouterr().out)["refs"]
    assert ref["blocks"] == [b2] and ref["rows"] == 30 and ref["rows_total"] == 40
    assert main(["rewrite", sql]) == 0
    assert f"(SELECT * FROM orders WHERE block_id IN ({b2})) AS o" in capsys.readouterr().out
    assert main(["route", sql]) == 0
    assert "orders AS o: 1/2 blocks, 30/40 rows (75.0%)" in capsys.readouterr().out
    assert main(["catalog", "show"]) == 0
    assert "active" in capsys.readouterr().out


@pytest.fixture
def star_env(tmp_path, monkeypatch):
    """customer blocks by segment, orders blocks by customer key: a diP can skip orders."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAYOUT_CATALOG_URL", url)

    def stats(**columns):
        return {c: {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": 0}
                for c, (lo, hi) in columns.items()}

    with Catalog(url) as catalog:
        ids = {}
        for table, blocks in (
            ("customer", [stats(c_custkey=(1, 10), c_mktsegment=("BUILDING", "BUILDING")),
                          stats(c_custkey=(11, 20), c_mktsegment=("MACHINERY", "MACHINERY"))]),
            ("orders", [stats(o_custkey=(1, 10)), stats(o_custkey=(11, 20))]),
        ):
            catalog.register_table(table, str(tmp_path / table))
            version, block_ids = catalog.begin_version(table, "", "handmade", {}, "r", len(blocks))
            catalog.set_blocks(version, [BlockRecord(b, 10, 100, f"p{b}", s, 0, 0)
                                         for b, s in zip(block_ids, blocks)])
            catalog.activate(version)
            ids[table] = block_ids
    return ids


def test_route_shows_which_diP_skipped_which_blocks(star_env, capsys):
    sql = ("SELECT count(*) FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey "
           "WHERE c.c_mktsegment = 'MACHINERY'")
    kept, skipped = star_env["orders"][1], star_env["orders"][0]
    assert main(["route", sql]) == 0
    out = capsys.readouterr().out
    assert "orders AS o: 1/2 blocks" in out
    assert f"diP c.c_custkey -> o.o_custkey skipped blocks [{skipped}]" in out
    assert main(["route", sql, "--json"]) == 0
    route = json.loads(capsys.readouterr().out)
    assert route["dips"][0]["blocks_removed"] == [skipped] and route["dips_built"] >= 1
    assert [r["blocks"] for r in route["refs"] if r["alias"] == "o"] == [[kept]]
    assert main(["explain", sql]) == 0
    out = capsys.readouterr().out
    assert "orders AS o: reads 1 of 2 blocks" in out and f"skips 1 by diP c.c_custkey -> o.o_custkey: [{skipped}]" in out
    assert main(["explain", sql, "--json"]) == 0
    refs = {r["alias"]: r for r in json.loads(capsys.readouterr().out)["refs"]}
    assert refs["o"]["skipped"] == [{"block_id": skipped, "by": "diP c.c_custkey -> o.o_custkey"}]
    assert main(["route", sql, "--no-dips", "--json"]) == 0
    route = json.loads(capsys.readouterr().out)
    assert route["dips"] == [] and [len(r["blocks"]) for r in route["refs"] if r["alias"] == "o"] == [2]


def test_route_of_malformed_sql_reads_everything(catalog_env, capsys, caplog):
    assert main(["route", "SELEC oops", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["analyzed"] is False
    assert any("reading everything" in r.getMessage() for r in caplog.records)
