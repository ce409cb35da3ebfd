"""Hostile parameters: names, partitions, paths, sizes and catalog URLs are checked before
any work, names reach SQL only quoted or bound, and a catalog password is never shown.

Fast: no Spark (a job or command that would start one here fails the test instead)."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys

import pytest

from layout_core.base import params
from layout_core.base.names import MAX_BLOCK_ROWS
from layout_core.base.params import ParamError
from layout_core.base.schema import SchemaError, load_schema, schema_from_dict
from layout_core.base.urls import masked_url, without_secrets
from layout_core.optimizers import optimizer_settings
from tests.conftest import pg_url
from tests.helpers.paths import PROJECT

TPCH = load_schema("tpch")
LINEITEM = TPCH.table("lineitem")
HOSTILE_NAMES = ["x;drop", "lineitem'; DROP TABLE layout_tables; --", 'li"neitem', "lineitem --", "`lineitem`",
                 "lineitem\nERROR forged log line", "../lineitem"]
PASSWORD_URL = "postgresql+psycopg2://postgres:s3cret@127.0.0.1:5432/test"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("LAYOUT_CATALOG_URL", "LAYOUT_WAREHOUSE", "LAYOUT_SCHEMA", "LAYOUT_CONFIG", "LAYOUT_ALLOWED_ROOTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAYOUT_CATALOG_URL", f"sqlite:///{tmp_path / 'catalog.db'}")
    monkeypatch.setenv("LAYOUT_WAREHOUSE", str(tmp_path / "warehouse"))


@pytest.fixture
def no_spark(monkeypatch):
    """Starting Spark (a job's or the CLI's session) fails the test."""
    import layout_core.spark.session as spark_session

    def refuse(*args, **kwargs):
        raise AssertionError("a SparkSession was started before the parameters were checked")

    monkeypatch.setattr(spark_session, "job_session", refuse)
    monkeypatch.setattr(spark_session, "local_session", refuse)


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_table_not_in_the_schema_is_refused_listing_the_tables(name):
    with pytest.raises(ParamError) as e:
        params.table_of(TPCH, name)
    assert "unknown table" in str(e.value)
    assert "customer, lineitem, nation, orders, part, partsupp, region, supplier" in str(e.value)
    assert "\n" not in str(e.value)  # shown as repr: no forged log lines


def test_columns_given_as_parameters_must_be_columns_of_the_table():
    assert params.column_of(LINEITEM, "L_SHIPDATE", "--date-column") == "l_shipdate"
    for name in ("l_shipdate; drop", "o_orderdate", "l_shipdate`", ""):
        with pytest.raises(ParamError, match=r"is not a column of lineitem; its columns: l_orderkey, l_partkey"):
            params.column_of(LINEITEM, name, "--date-column")


def test_optimizer_settings_that_name_columns_are_checked_against_the_table():
    assert optimizer_settings(LINEITEM, "sortkey", {"sort_column": "l_shipdate"})["sort_column"] == "l_shipdate"
    with pytest.raises(ParamError, match=r"setting sort_column 'l_shipdate; drop' is not a column of lineitem"):
        optimizer_settings(LINEITEM, "sortkey", {"sort_column": "l_shipdate; drop"})
    with pytest.raises(ParamError, match=r"setting curve_columns 'nope' is not a column"):
        optimizer_settings(LINEITEM, "zorder", {"curve_columns": "l_shipdate,nope"})
    with pytest.raises(ParamError, match="no setting"):
        optimizer_settings(LINEITEM, "sortkey", {"sort_colum": "l_shipdate"})


def test_the_partition_column_is_a_plain_name_that_is_not_a_column_already():
    assert params.partition_column(LINEITEM, "dt") == "dt"
    for name in ("dt; drop", 'd"t', "d`t", "", "1dt"):
        with pytest.raises(ParamError, match="must be a plain name"):
            params.partition_column(LINEITEM, name)
    for name in ("l_shipdate", "block_id"):
        with pytest.raises(ParamError, match="already a column"):
            params.partition_column(LINEITEM, name)


@pytest.mark.parametrize("value, problem", [
    ("..", "holds '..'"), ("../../etc", "path separator"), ("a/b", "path separator"), ("a\\b", "path separator"),
    ("1995..01", "holds '..'"), ("1995\x00", "control character"), ("1995\n01", "control character"),
    ("x" * 129, "longer than 128"), ("1995'; drop", "may only hold"), ("*", "may only hold"),
    ("_all", "may only hold"), (" 1995", "may only hold"), ("dt=1995", "may only hold"), ("10:00", "may only hold"),
])
def test_hostile_partition_values_are_refused(value, problem):
    with pytest.raises(ParamError, match=re.escape(problem)):
        params.partition_value(value)


def test_ordinary_partition_values_pass_and_an_empty_one_only_where_allowed():
    for value in ("1995", "1995-01", "2024-03-01", "fallback", "v1.2", "a_b+c", "x" * 128):
        assert params.partition_value(value) == value
    assert params.partition_value("") == ""
    with pytest.raises(ParamError, match="empty"):
        params.partition_value("", required=True)


def test_run_ids_that_would_name_a_folder_outside_staging_are_refused():
    assert params.run_id("layout_nightly__scheduled__2024-01-01T00:00:00+00:00")
    for bad in ("", " ", ".", "..", "...", "a\nb", "x" * 251):
        with pytest.raises(ParamError, match="--run-id"):
            params.run_id(bad)


def test_schema_files_with_hostile_names_or_types_are_refused():
    for tables, match in (({"t;drop": {"columns": {"a": "int"}}}, "table 't;drop' must be a plain name"),
                          ({"t": {"columns": {"a`b": "int"}}}, "column 'a`b' must be a plain name"),
                          ({"t": {"columns": {'a"': "int"}}}, "must be a plain name"),
                          ({"t": {"columns": {"a": "int; DROP TABLE x"}}}, "is not a Spark type name"),
                          ({"t": {"columns": {"a": "string`, `b"}}}, "is not a Spark type name")):
        with pytest.raises(SchemaError, match=re.escape(match)):
            schema_from_dict({"tables": tables})
    ok = schema_from_dict({"tables": {"t": {"columns": {"a": "decimal(12, 2)", "b": "array<string>",
                                                        "c": "struct<x:int,y:string>"}}}})
    assert ok.table("t").column_names == ("a", "b", "c")


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("value", [0, -1, 10**12, 10**9 + 1, "0", "1e12", "many", 1.5, True, None, ""])
def test_block_rows_outside_1_to_a_billion_are_refused(value):
    with pytest.raises(ParamError, match="must be an integer from 1 to 1_000_000_000"):
        params.block_rows(value)


def test_block_rows_inside_the_bounds_pass():
    assert [params.block_rows(v) for v in (1, "50000", 10**9, 2000.0)] == [1, 50000, 10**9, 2000]


def test_the_optimizers_refuse_block_rows_above_the_bound_too():
    from layout_core.optimizers import PlanError, get_optimizer

    with pytest.raises(PlanError, match="at most 1_000_000_000"):
        get_optimizer("fineblock").resolve({"block_rows": 10**12})


# --------------------------------------------------------------------------- paths


def test_dot_dot_components_are_refused_with_or_without_roots(tmp_path):
    for path in ("../etc/passwd", "/landing/../etc", "/landing/..", "file:///landing/../etc", "s3://b/../x",
                 "a\\..\\b"):
        with pytest.raises(ParamError, match="'..' component"):
            params.input_path(path, "--source")
    assert params.input_path("/landing/x..y/z", "--source") == "/landing/x..y/z"  # not a component
    assert params.input_path("/anywhere/at/all", "--source") == "/anywhere/at/all"  # no roots: as before


def test_with_allowed_roots_paths_must_resolve_inside_them(tmp_path):
    landing, secret = tmp_path / "landing", tmp_path / "secret"
    landing.mkdir()
    secret.mkdir()
    (landing / "escape").symlink_to(secret)  # a link out of the root
    roots = params.parse_roots(f"{landing}{os.pathsep}s3://bucket/landing")
    assert roots == (str(landing), "s3://bucket/landing")
    assert params.input_path(str(landing / "dt=1" / "*.parquet"), "--source", roots)
    assert params.input_path(f"file://{landing}/x.parquet", "--source", roots)
    assert params.input_path("s3://bucket/landing/dt=1", "--source", roots)
    for outside in (str(secret / "x.parquet"), str(landing / "escape" / "x.parquet"), str(tmp_path) + "/landing2",
                    "/etc/passwd", "s3://bucket/landing2/x", "s3://other/landing", "gs://bucket/landing/x"):
        with pytest.raises(ParamError) as e:
            params.input_path(outside, "--source", roots)
        assert "outside the allowed roots (LAYOUT_ALLOWED_ROOTS)" in str(e.value)
        assert f"{landing}, s3://bucket/landing" in str(e.value)


def test_allowed_roots_come_from_the_environment_or_the_config_file(tmp_path, monkeypatch):
    from layout_core.base.config import ConfigError, load_settings

    assert load_settings().allowed_roots == ()
    (tmp_path / "layout.yaml").write_text("allowed_roots: [/data/landing, /data/logs]\n")
    assert load_settings().allowed_roots == ("/data/landing", "/data/logs")
    monkeypatch.setenv("LAYOUT_ALLOWED_ROOTS", "/a:/b:s3://bucket/x")
    assert load_settings().allowed_roots == ("/a", "/b", "s3://bucket/x")
    (tmp_path / "layout.yaml").write_text("allowed_root: /data\n")
    with pytest.raises(ConfigError, match="unknown settings"):
        load_settings()


def test_a_query_log_must_be_a_text_file(tmp_path):
    log = tmp_path / "q.sql"
    log.write_text("SELECT * FROM lineitem WHERE l_quantity < 10;\n")
    assert params.text_file(str(log), "--query-log") == str(log)
    with pytest.raises(ParamError, match="does not exist"):
        params.text_file(str(tmp_path / "missing.sql"), "--query-log")
    with pytest.raises(ParamError, match="is a folder"):
        params.text_file(str(tmp_path), "--query-log")
    with pytest.raises(ParamError, match="not a regular file"):
        params.text_file("/dev/null", "--query-log")
    for name, head in (("parquet", b"PAR1" + bytes(range(256)) * 4), ("gzip", b"\x1f\x8b\x08\x00" + b"x" * 100),
                       ("zeros", b"\x00" * 5000), ("random", bytes((i * 97) % 256 for i in range(8192)))):
        binary = tmp_path / f"{name}.sql"
        binary.write_bytes(head)
        with pytest.raises(ParamError, match=r"is a binary file, not SQL text"):
            params.text_file(str(binary), "--query-log")


def test_a_long_path_is_named_whole_in_the_error(tmp_path):
    deep = tmp_path / ("landing_" * 12) / "2024-01-01" / "queries_of_the_day.sql"  # ~200 characters
    with pytest.raises(ParamError) as refused:
        params.text_file(str(deep), "--query-log")
    assert f"'{deep}' does not exist" in str(refused.value)


def test_a_query_log_with_a_few_bad_bytes_is_still_a_log():
    # one bad statement is reported and skipped (DESIGN: never fatal), not the whole log refused
    head = b"SELECT 1;\n" * 700 + b"SELECT * FROM orders WHERE o_comment = 'a\x00b';\n" + "SELECT 'é';".encode()
    assert not params.looks_binary(head)
    assert not params.looks_binary(head[:-1])  # a character cut at the end of the head is no error
    assert not params.looks_binary(b"")


# --------------------------------------------------------------------------- SQL: quoted or bound, never executed


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_names_reach_the_catalog_as_bound_parameters(catalog_url, name):
    from layout_core.catalog import Catalog

    with Catalog(catalog_url) as catalog:
        catalog.register_table("orders", "/w/orders")
        catalog.register_table(name, "/w/x';--", partition_column='d"t;')
        assert catalog.table(name).location == "/w/x';--"
        assert catalog.table(name).partition_column == 'd"t;'
        assert sorted(t.name for t in catalog.tables()) == sorted(["orders", name])
        assert catalog.query_history(table=name) == []
        version, _ = catalog.begin_version(name, "1995'; drop", "handmade", {"k": "v'"}, "r';--", 0)
        assert catalog.version(version).partition == "1995'; drop"
    with Catalog(catalog_url) as catalog:  # every table still there
        assert catalog.table("orders").location == "/w/orders"


@pytest.mark.parametrize("value", ["1995'; DROP TABLE t; --", "a\\'b", "x\\", "'", "a\nb"])
def test_rendered_literals_and_identifiers_stay_data(value):
    import sqlglot
    from sqlglot import exp

    from layout_core.predicates import identifier, literal

    column = 'we"ird`; DROP TABLE t; --'
    sql = f"SELECT * FROM t WHERE {identifier(column)} IN ({literal(value)})"
    (tree,) = sqlglot.parse(sql, read="spark")
    assert [c.name for c in tree.find_all(exp.Column)] == [column]
    assert [s.this for s in tree.find_all(exp.Literal) if s.is_string] == [value]
    assert not list(tree.find_all(exp.Drop))


def test_the_duckdb_views_quote_hostile_names():
    duckdb = pytest.importorskip("duckdb")
    from layout_core.check.engines import _empty_select, _name

    table = schema_from_dict({"tables": {"t": {"columns": {"a": "int"}}}}).table("t")
    column = 'x"; DROP TABLE y; --'
    connection = duckdb.connect(":memory:")
    connection.execute("CREATE TABLE y (v INTEGER)")
    view = _name('v;"')
    connection.execute(f"CREATE VIEW {view} AS {_empty_select(table, column)}")
    assert [d[0] for d in connection.execute(f"SELECT * FROM {view}").description] == ["a", column, "block_id"]
    assert connection.execute("SELECT count(*) FROM y").fetchone() == (0,)  # y was not dropped


# --------------------------------------------------------------------------- job entry points


def _job(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROJECT / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(PROJECT)})


def test_a_job_with_a_hostile_table_fails_at_once_without_spark():
    done = _job(["jobs/ingest.py", "--table", "x;drop", "--partition", "1995", "--run-id", "r",
                 "--source", "/tmp/x.parquet"])
    assert done.returncode == 2
    assert "ingest refused its arguments: unknown table 'x;drop'; the schema 'tpch' has: customer" in done.stdout
    assert "Traceback" not in done.stderr and "SparkContext" not in done.stdout + done.stderr


@pytest.mark.parametrize("step, argv, message", [
    ("ingest", ["--table", "lineitem", "--partition", "../../etc", "--run-id", "r", "--source", "/x"],
     "the partition '../../etc' holds a path separator"),
    ("ingest", ["--table", "lineitem", "--run-id", "r", "--source", "/landing/../etc/x"], "'..' component"),
    ("ingest", ["--table", "lineitem", "--run-id", "r", "--source", "/x", "--date-column", "l_shipdate;drop"],
     "--date-column 'l_shipdate;drop' is not a column of lineitem"),
    ("ingest", ["--table", "lineitem", "--run-id", "r", "--source", "/x", "--start", "1995-13-45"],
     "--start must be a date"),
    ("ingest", ["--table", "lineitem", "--run-id", "r", "--source", "/x", "--partition-column", "dt;drop"],
     "--partition-column must be a plain name"),
    ("ingest", ["--table", "lineitem", "--run-id", "..", "--source", "/x"], "--run-id must be"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--block-rows", "0"],
     "--block-rows must be an integer from 1 to 1_000_000_000, not 0"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--block-rows", str(10**12)],
     "--block-rows must be an integer from 1 to 1_000_000_000"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--settings", '{"block_rows": 1000000000000}'],
     "block_rows must be positive and at most 1_000_000_000"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--optimizer", "sortkey",
                   "--settings", '{"sort_column": "l_shipdate\'; --"}'],
     "setting sort_column \"l_shipdate'; --\" is not a column of lineitem"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--query-log", "QUERY_LOG_DIR"], "is a folder"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--query-log", "BINARY_LOG"], "is a binary file"),
    ("featurize", ["--table", "lineitem", "--run-id", "r", "--query-log", "MISSING_LOG"], "does not exist"),
])
def test_pipeline_jobs_check_every_argument_before_spark_or_the_catalog(step, argv, message, tmp_path, no_spark,
                                                                         monkeypatch, caplog):
    from layout_core.flows.nightly import job

    (tmp_path / "binary.sql").write_bytes(b"PAR1\x00\x01\x02" * 100)
    files = {"QUERY_LOG_DIR": str(tmp_path), "BINARY_LOG": str(tmp_path / "binary.sql"),
             "MISSING_LOG": str(tmp_path / "missing.sql")}
    monkeypatch.setattr("layout_core.catalog.Catalog", None)  # opening the catalog would fail the test
    with caplog.at_level("ERROR"):
        assert job.main(step, [files.get(a, a) for a in argv]) == 2
    assert message in caplog.text


def test_with_allowed_roots_a_job_refuses_a_source_and_a_warehouse_outside_them(tmp_path, no_spark, monkeypatch,
                                                                                caplog):
    from layout_core.flows.nightly import job

    (tmp_path / "landing").mkdir()
    monkeypatch.setenv("LAYOUT_ALLOWED_ROOTS", str(tmp_path))
    with caplog.at_level("ERROR"):
        assert job.main("ingest", ["--table", "lineitem", "--run-id", "r", "--source", "/etc/passwd"]) == 2
    assert f"--source '/etc/passwd' is outside the allowed roots (LAYOUT_ALLOWED_ROOTS): {tmp_path}" in caplog.text
    caplog.clear()
    with caplog.at_level("ERROR"):
        assert job.main("ingest", ["--table", "lineitem", "--run-id", "r", "--source", str(tmp_path / "landing"),
                                   "--warehouse", "/var/tmp/elsewhere"]) == 2
    assert "the warehouse '/var/tmp/elsewhere' is outside the allowed roots" in caplog.text


@pytest.mark.parametrize("argv, message", [
    (["stage_changes", "--table", "customer'; --", "--run-id", "r", "--inserted", "/x"], "unknown table"),
    (["stage_changes", "--table", "customer", "--partition", "..", "--run-id", "r"], "the partition '..' holds"),
    (["stage_changes", "--table", "customer", "--run-id", "r", "--deleted", "/a/../../etc"], "'..' component"),
])
def test_the_change_batch_job_checks_its_arguments_before_spark(argv, message, no_spark, caplog):
    from layout_core.flows.changes import job

    with caplog.at_level("ERROR"):
        assert job.main(argv) == 2
    assert message in caplog.text


@pytest.mark.parametrize("argv, message", [
    (["plan_reorg", "--table", "lineitem; DROP TABLE layout_versions", "--run-id", "r"], "unknown table"),
    (["plan_reorg", "--table", "lineitem", "--run-id", "r", "--q", "0"], "q must be > 0"),
])
def test_the_reorganization_job_checks_its_arguments_before_spark(argv, message, no_spark, caplog):
    from layout_core.flows.reorg import job

    with caplog.at_level("ERROR"):
        assert job.main(argv) == 2
    assert message in caplog.text


# --------------------------------------------------------------------------- the CLI


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    from layout_core.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("argv, message", [
    (["reorganize", "--table", "x'; DROP TABLE layout_tables; --"], "unknown table"),
    (["workload", "shift", "--table", "x;drop"], "unknown table 'x;drop'"),
    (["changes", "apply", "--table", "customer", "--partition", "../../x", "--inserted", "/x"], "path separator"),
    (["changes", "apply", "--table", "customer", "--inserted", "../x"], "'..' component"),
    (["reorganize", "--table", "lineitem", "--run-id", ".."], "--run-id must be"),
    (["workload", "analyze", "."], "the query log '.' is a folder"),
    (["workload", "import", "missing.sql"], "the query log 'missing.sql' does not exist"),
    (["run-workload", "binary.sql"], "the query file 'binary.sql' is a binary file"),
    (["route", "@binary.sql"], "the SQL file 'binary.sql' is a binary file"),
])
def test_cli_commands_refuse_hostile_arguments_in_one_line(argv, message, tmp_path, no_spark, caplog, capsys):
    (tmp_path / "binary.sql").write_bytes(bytes(range(256)) * 40)
    with caplog.at_level("ERROR"):
        code, _ = _cli(argv, capsys)
    assert code == 1 and message in caplog.text
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("value", ["0", "-5", str(10**12)])
def test_cli_block_rows_outside_the_bounds_are_usage_errors(value, capsys):
    with pytest.raises(SystemExit) as e:
        _cli(["bench", "tpch", "--block-rows", value], capsys)
    assert e.value.code == 2
    assert "--block-rows must be an integer from 1 to 1_000_000_000" in capsys.readouterr().err


def test_dag_test_refuses_block_rows_before_airflow_starts(caplog, capsys, monkeypatch):
    import layout_core.airflow.dag_run as airflow_run

    monkeypatch.setattr(airflow_run, "run_dag_test", None)  # calling airflow would fail the test
    with caplog.at_level("ERROR"):
        code, _ = _cli(["dag-test", "layout_nightly", "--conf", '{"block_rows": 0}'], capsys)
    assert code == 1 and "block_rows must be an integer from 1 to 1_000_000_000, not 0" in caplog.text


def test_a_hostile_table_filter_is_data_for_the_history(tmp_path, capsys):
    from layout_core.catalog import Catalog

    code, out = _cli(["workload", "history", "--table", "x'; DROP TABLE layout_tables; --"], capsys)
    assert code == 0 and out.strip().endswith("0 queries")
    with Catalog(os.environ["LAYOUT_CATALOG_URL"]) as catalog:
        assert catalog.tables() == []  # layout_tables still there


# --------------------------------------------------------------------------- catalog passwords


def test_masked_urls_and_messages_never_hold_the_password():
    assert masked_url(PASSWORD_URL) == "postgresql+psycopg2://postgres:***@127.0.0.1:5432/test"
    assert masked_url("not a URL s3cret") == "<a catalog URL that cannot be parsed>"
    assert masked_url("postgresql://u:s3cret@h:notaport/d").find("s3cret") == -1
    assert masked_url("sqlite:////tmp/c.db") == "sqlite:////tmp/c.db"
    text = f"failed for {PASSWORD_URL} with s3cret and p%40ss"
    assert "s3cret" not in without_secrets(text, PASSWORD_URL)
    assert "p%40ss" not in without_secrets(text, "postgresql://u:p%40ss@h/d")


def _run_cli(argv: list[str], env: dict) -> str:
    # run in the test's own folder (clean_env): a default SQLite catalog lands there
    done = subprocess.run([sys.executable, "-m", "layout_core.cli", *argv], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})
    return f"rc={done.returncode}\n{done.stdout}\n{done.stderr}"


def test_a_catalog_password_appears_in_no_output(tmp_path, capsys, caplog):
    from layout_core.catalog import CatalogUnreachable
    from layout_core.cli import main

    env = {"LAYOUT_CATALOG_URL": "", "PYTHONPATH": str(PROJECT)}
    bad = ["postgresql+psycopg2://postgres:s3cret@127.0.0.1:1/test",  # nothing listens
           "postgresql+psycopg2://postgres:s3cret@no-such-host.invalid:5432/test",
           "postgresql+psycopg2://postgres:s3cret@127.0.0.1:notaport/test",
           "postgresql+nodriver://postgres:s3cret@127.0.0.1/test", "not a URL s3cret"]
    commands = (["catalog", "show"], ["-v", "stats"], ["workload", "history"])
    for i, url in enumerate(bad):
        # in process: every URL through every command
        for argv in commands:
            assert main([*argv, "--catalog", url]) == 1
            printed = capsys.readouterr()
            assert "s3cret" not in printed.out + printed.err + caplog.text, argv
            assert "cannot open the catalog" in printed.err + caplog.text, argv
        # and each URL once as a user runs it, the command line in its own process (the logs too)
        out = _run_cli([*commands[i % len(commands)], "--catalog", url], env)
        assert out.startswith("rc=1") and "cannot open the catalog" in out, out
        assert "s3cret" not in out and "Traceback" not in out, out
        with pytest.raises(CatalogUnreachable) as e:
            from layout_core.catalog import Catalog

            Catalog(url)
        assert "s3cret" not in str(e.value) and "s3cret" not in e.value.reason
    out = _run_cli(["catalog", "show"], {**env, "LAYOUT_CATALOG_URL": bad[0]})
    assert "postgres:***@127.0.0.1:1/test" in out and "s3cret" not in out


def test_a_working_catalog_url_with_a_password_is_masked_too():
    if not pg_url():
        pytest.skip("needs LAYOUT_TEST_PG_URL (PostgreSQL on 127.0.0.1:5432, trust auth)")
    from tests.helpers.pg_scratch import scratch_pg_schema

    with scratch_pg_schema(PASSWORD_URL) as url:  # trust auth: any password is accepted
        assert "s3cret" in url
        out = _run_cli(["catalog", "show", "--catalog", url], {"PYTHONPATH": str(PROJECT)})
        assert out.startswith("rc=0") and "no tables in postgresql+psycopg2://postgres:***@127.0.0.1:5432/test" in out
        assert "s3cret" not in out
        out = _run_cli(["-v", "stats", "--catalog", url], {"PYTHONPATH": str(PROJECT)})
        assert out.startswith("rc=0") and "s3cret" not in out, out


# --------------------------------------------------------------------------- DAG params


@pytest.fixture(scope="module")
def dag_files():
    sys.path.insert(0, str(PROJECT / "dags"))  # as Airflow does: the DAG files import dags/spark_jobs.py
    try:
        return {name: runpy.run_path(str(PROJECT / "dags" / f"{name}.py"))
                for name in ("layout_nightly", "layout_changes", "layout_reoptimize")}
    finally:
        sys.path.remove(str(PROJECT / "dags"))


def _refused(param, value) -> bool:
    from airflow.sdk import Param

    try:
        Param(value, **param.schema).resolve()
    except Exception:  # ParamValidationError
        return True
    return False


def test_dag_params_refuse_hostile_values_in_the_trigger_form(dag_files):
    dags = {"nightly": dag_files["layout_nightly"]["dag"], "star": dag_files["layout_nightly"]["star_dag"],
            "changes": dag_files["layout_changes"]["dag"], "reopt": dag_files["layout_reoptimize"]["dag"]}
    refused = [
        ("nightly", "block_rows", [0, -1, 10**12, 10**9 + 1]),
        ("star", "block_rows", [0, 10**12]), ("star", "dimension_block_rows", [0, 10**12]),
        ("nightly", "partition", ["../x", "a/b", "..", "a\\b", "x\x00"]),
        ("star", "partition", ["../x"]), ("changes", "partition", ["../x", "a/b"]),
        ("nightly", "table", ["x;drop", "lineitem'--", "", "a b"]),
        ("changes", "table", ["x;drop"]), ("reopt", "table", ["x;drop", "a'b"]),
        ("nightly", "source", ["../x", "/landing/../etc", "/landing/.."]),
        ("nightly", "query_log", ["../q.sql"]), ("star", "source_dir", ["/a/../b"]),
        ("changes", "inserted", ["/a/../b"]), ("changes", "deleted", [".."]),
        ("nightly", "date_column", ["l_shipdate; drop"]),
    ]
    for dag, name, values in refused:
        for value in values:
            assert _refused(dags[dag].params.get_param(name), value), (dag, name, value)
    accepted = [("nightly", "block_rows", [1, 50000, 10**9]),
                ("nightly", "partition", ["", "{{ ds_nodash }}", "1995-01", "{{ macros.ds_add(ds, 1) }}"]),
                ("nightly", "source", ["/landing/lineitem/dt={{ ds }}", "s3://b/x..y/*.parquet", ""]),
                ("nightly", "table", ["lineitem"]), ("reopt", "table", ["", "orders"]),
                ("nightly", "date_column", ["", "l_shipdate"])]
    for dag, name, values in accepted:
        for value in values:
            assert not _refused(dags[dag].params.get_param(name), value), (dag, name, value)
    # the DAG file cannot import layout_core: its copies of the bounds must stay the same
    assert dag_files["layout_nightly"]["PARTITION_PATTERN"] == params.PARTITION_PARAM_PATTERN
    assert dag_files["layout_nightly"]["PATH_PATTERN"] == params.PATH_PARAM_PATTERN
    assert dag_files["layout_nightly"]["MAX_BLOCK_ROWS"] == MAX_BLOCK_ROWS


def test_the_landing_sensor_checks_the_rendered_partition_and_source(dag_files, monkeypatch, tmp_path):
    check = dag_files["layout_nightly"]["check_rendered"]
    ok = {"partition": "1995-01", "source": str(tmp_path), "start": "1995-01-01", "end": ""}
    check(ok)
    for bad, message in (({"partition": "1995/../../x"}, "path separator"), ({"source": "/l/../etc"}, "'..'"),
                         ({"start": "yesterday"}, "start must be a date")):
        with pytest.raises(ParamError, match=re.escape(message)):
            check({**ok, **bad})
    monkeypatch.setenv("LAYOUT_ALLOWED_ROOTS", str(tmp_path / "landing"))
    with pytest.raises(ParamError, match="outside the allowed roots"):
        check(ok)
