"""Static checks of docker-compose.yml (no Docker engine needed).

(a) the parsed file wires the services, volumes, connection and settings the
pipeline relies on; (b) `docker-compose config` / `docker compose config`
accepts the file when a Compose executable is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.helpers.paths import PROJECT

ROOT = PROJECT
COMPOSE_FILE = ROOT / "docker-compose.yml"

AIRFLOW_SERVICES = (
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-init",
)
SPARK_SERVICES = ("spark-master", "spark-worker")
ALL_SERVICES = ("postgres", *AIRFLOW_SERVICES, *SPARK_SERVICES)


@pytest.fixture(scope="module")
def compose() -> dict:
    # safe_load resolves the x-airflow-common anchors and `<<` merge keys.
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # KEY=VALUE form
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def _mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of every volume entry, short or long syntax."""
    out = []
    for vol in service.get("volumes") or []:
        if isinstance(vol, str):
            parts = vol.split(":")
            out.append((parts[0], parts[1]) if len(parts) > 1 else ("", parts[0]))
        else:
            out.append((str(vol.get("source", "")), str(vol["target"])))
    return out


def _published_ports(service: dict) -> list[dict]:
    """Each published port as {host_ip, published, target}."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            out.append({"host_ip": port.get("host_ip"), "published": port.get("published"),
                        "target": port.get("target")})
            continue
        parts = str(port).split(":")
        if len(parts) == 3:
            out.append({"host_ip": parts[0], "published": parts[1], "target": parts[2]})
        elif len(parts) == 2:
            out.append({"host_ip": None, "published": parts[0], "target": parts[1]})
        else:
            out.append({"host_ip": None, "published": None, "target": parts[0]})
    return out


def test_all_services_exist(compose):
    missing = [name for name in ALL_SERVICES if name not in compose["services"]]
    assert not missing, f"services missing from docker-compose.yml: {missing}"


@pytest.mark.parametrize("name", AIRFLOW_SERVICES + SPARK_SERVICES)
def test_warehouse_volume_mounted_at_same_path(compose, name):
    assert ("warehouse", "/warehouse") in _mounts(compose["services"][name]), (
        f"{name} must mount the named volume `warehouse` at /warehouse"
    )


def test_named_volumes_declared(compose):
    declared = set(compose.get("volumes") or {})
    assert "warehouse" in declared
    used = {src for svc in compose["services"].values() for src, _ in _mounts(svc)
            if src and not src.startswith((".", "/", "~"))}
    assert used <= declared, f"named volumes used but not declared: {sorted(used - declared)}"


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_spark_default_connection(compose, name):
    raw = _env(compose["services"][name]).get("AIRFLOW_CONN_SPARK_DEFAULT")
    assert raw, f"{name}: AIRFLOW_CONN_SPARK_DEFAULT is not set"
    conn = json.loads(raw)
    assert conn["conn_type"] == "spark"
    assert "spark-master" in conn["host"]
    master = conn["host"] if "://" in conn["host"] else f"spark://{conn['host']}"
    if conn.get("port"):
        master = f"{master}:{conn['port']}"
    assert master == "spark://spark-master:7077"


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_pipeline_and_airflow_settings(compose, name):
    env = _env(compose["services"][name])
    assert env.get("LAYOUT_CATALOG_URL", "").startswith("postgresql+psycopg2://")
    assert env["LAYOUT_CATALOG_URL"].endswith("@postgres:5432/layout")
    assert env.get("LAYOUT_WAREHOUSE") == "/warehouse"
    assert env.get("LAYOUT_JOBS_DIR") == "/opt/airflow/jobs"
    assert str(env.get("AIRFLOW__CORE__LOAD_EXAMPLES")).lower() == "false"
    assert env.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "").endswith("airflow-apiserver:8080/execution/")
    # Components only trust each other's tokens with one shared secret.
    assert env.get("AIRFLOW__API_AUTH__JWT_SECRET")
    assert env.get("AIRFLOW__API__SECRET_KEY")


def test_secrets_identical_across_airflow_services(compose):
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        values = {_env(compose["services"][name]).get(key) for name in AIRFLOW_SERVICES}
        assert len(values) == 1, f"{key} differs between Airflow services: {values}"


def test_published_ports_bind_loopback_only(compose):
    published = 0
    for name, service in compose["services"].items():
        for port in _published_ports(service):
            if port["published"] is None and port["host_ip"] is None:
                pytest.fail(f"{name}: port {port['target']} is published on a random host port on all interfaces")
            assert port["host_ip"] == "127.0.0.1", f"{name}: {port} is not bound to 127.0.0.1"
            published += 1
    assert published >= 2  # the Airflow UI and the Spark master UI
    api_targets = {str(p["target"]) for p in _published_ports(compose["services"]["airflow-apiserver"])}
    assert "8080" in api_targets


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_dags_and_jobs_mounted(compose, name):
    mounts = _mounts(compose["services"][name])
    assert ("./dags", "/opt/airflow/dags") in mounts
    assert ("./jobs", "/opt/airflow/jobs") in mounts
    assert ("./plugins", "/opt/airflow/plugins") in mounts  # the Layouts pages


def test_referenced_files_exist(compose):
    for name in AIRFLOW_SERVICES:
        build = compose["services"][name].get("build")
        assert build, f"{name} is not built from docker/airflow.Dockerfile"
        context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
        dockerfile = context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        assert dockerfile.resolve() == (ROOT / "docker" / "airflow.Dockerfile").resolve()
    init_mounts = [(src, dst) for src, dst in _mounts(compose["services"]["postgres"])
                   if dst.startswith("/docker-entrypoint-initdb.d")]
    assert init_mounts, "postgres has no init script in /docker-entrypoint-initdb.d"
    for src, _ in init_mounts:
        assert (ROOT / src).is_file(), f"postgres init script {src} does not exist"
    init_sql = (ROOT / "docker" / "postgres-init.sql").read_text().lower()
    assert "create database layout" in init_sql


def test_dockerfile_contents():
    text = (ROOT / "docker" / "airflow.Dockerfile").read_text()
    assert "FROM ${AIRFLOW_IMAGE}" in text or "FROM apache/airflow:3.3.2" in text
    assert "apache/airflow:3.3.2-python3.11" in text
    assert "openjdk-17-jre-headless" in text
    assert "apache-airflow-providers-apache-spark" in text
    assert "COPY" in text and "pyproject.toml" in text and "layout_core" in text


def test_healthchecks_and_dependency_conditions(compose):
    services = compose["services"]
    assert services["postgres"].get("healthcheck")
    assert services["airflow-apiserver"].get("healthcheck")
    assert services["airflow-apiserver"]["command"] == "api-server"
    assert services["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES:
        if name == "airflow-init":
            continue
        deps = services[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy"
        assert deps["airflow-init"]["condition"] == "service_completed_successfully"
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_started"
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]


def test_spark_hook_resolves_the_standalone_master(compose, tmp_path):
    """SparkSubmitHook turns the compose connection into `--master spark://spark-master:7077`.

    A malformed connection makes the hook fall back to `yarn` silently, so ask the hook itself.
    Runs in a subprocess with a scratch AIRFLOW_HOME.
    """
    pytest.importorskip("airflow.providers.apache.spark")
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(tmp_path),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_SPARK_DEFAULT=_env(compose["services"]["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"],
    )
    code = (
        "from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook\n"
        "print(SparkSubmitHook(conn_id='spark_default')._resolve_connection()['master'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "spark://spark-master:7077"


def _compose_command() -> list[str] | None:
    exe = shutil.which("docker-compose")
    if exe:
        return [exe]
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return [docker, "compose"]
    return None


def test_compose_config_validates():
    cmd = _compose_command()
    if cmd is None:
        pytest.skip("docker compose is not installed: cannot validate docker-compose.yml syntax")
    # `config` only parses, interpolates and validates: no engine is contacted.
    proc = subprocess.run([*cmd, "-f", str(COMPOSE_FILE), "config", "-q"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} config failed:\n{proc.stdout}\n{proc.stderr}"
