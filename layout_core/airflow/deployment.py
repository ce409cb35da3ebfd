"""A real Airflow deployment on loopback: api-server, scheduler, DAG processor, triggerer.

`airflow dags test` (layout_core.airflow.dag_run) runs a DAG in-process; this
module starts the four Airflow components as child processes instead, the
way a scheduler would run the nightly DAGs in production:

- metadata in a PostgreSQL database of its own (`airflow db migrate`);
- LocalExecutor, parallelism 4, the simple auth manager with one admin user
  whose password file we write (so the password is known);
- one JWT secret shared by all components; the execution API at the
  api-server's own port;
- everything on 127.0.0.1: the api-server binds there and the log servers
  of the scheduler and the triggerer are not started (`--skip-serve-logs`);
  `Deployment.assert_loopback_only()` checks every listening socket of the
  deployment's processes (spark-submit's JVMs included).

The environment of the DAGs (DAGs folder, `spark_default` in local mode,
LAYOUT_CATALOG_URL, LAYOUT_WAREHOUSE, PATH) is the one of `airflow_env`. The
plugins folder is the project's `plugins/`: the api-server serves the Layouts
pages (`layout_core.airflow.pages`) under /layouts, behind Airflow's login.
Every process is stopped by its pid (SIGTERM, then SIGKILL) whatever happens.

    python -m layout_core.airflow.deployment start   # `make airflow`
    python -m layout_core.airflow.deployment stop    # `make airflow-stop`
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import ipaddress
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from layout_core.airflow.dag_run import PROJECT, _airflow, airflow_env
from layout_core.base.config import load_settings
from layout_core.base.errors import ToolError
from layout_core.base.urls import masked_url
from layout_core.airflow.processes import alive, proc_stat, process_tree, reap, stop_processes

PG_SERVER = os.environ.get("LAYOUT_AIRFLOW_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
HOST = "127.0.0.1"
# The order they start in. The api-server stops last: running tasks report their
# state through its execution API.
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
TERMINAL_STATES = ("success", "failed")
GET_ATTEMPTS = 3  # tries of a REST GET that times out (a GET changes nothing, so it may be asked again)


# --- PostgreSQL -------------------------------------------------------------------------

def _pg_connect(server: str, database: str = "postgres"):
    import psycopg2  # the PostgreSQL driver, only for the deployment's metadata database

    conn = psycopg2.connect(f"{server.rstrip('/')}/{database}", connect_timeout=5)
    conn.autocommit = True
    return conn


def pg_error(server: str = PG_SERVER) -> str | None:
    """None if the PostgreSQL server answers, else why not."""
    try:
        _pg_connect(server).close()
    except Exception as e:  # psycopg2.OperationalError, or psycopg2 missing
        return str(e).strip() or type(e).__name__
    return None


def create_database(name: str, server: str = PG_SERVER, exist_ok: bool = False) -> None:
    conn = _pg_connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone():
                if exist_ok:
                    return
                raise ToolError(f"database {name} already exists on {server}")
            cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()


def drop_database(name: str, server: str = PG_SERVER) -> None:
    """Drop the database, closing whatever connections are still open to it."""
    conn = _pg_connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        conn.close()


def database_url(name: str, server: str = PG_SERVER) -> str:
    """The SQLAlchemy URL Airflow uses for its metadata (psycopg2 driver)."""
    scheme, rest = server.rstrip("/").split("://", 1)
    return f"{scheme.split('+')[0]}+psycopg2://{rest}/{name}"


@contextlib.contextmanager
def scratch_database(server: str = PG_SERVER, prefix: str = "airflow_"):
    """A fresh, empty database (yields its SQLAlchemy URL); dropped afterwards."""
    name = f"{prefix}{secrets.token_hex(6)}"
    create_database(name, server)
    try:
        yield database_url(name, server)
    finally:
        drop_database(name, server)


# --- processes --------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _start_time(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[19]) if fields else None


def stop_components(pids: dict[str, int], timeout: float = 30.0, processes: list[subprocess.Popen] = ()) -> None:
    """Stop the components by their pids: all but the api-server first, then it."""
    try:
        stop_processes([pid for name, pid in pids.items() if name != "api-server"], timeout, processes)
    finally:
        stop_processes([pid for name, pid in pids.items() if name == "api-server"], timeout, processes)


# --- sockets ----------------------------------------------------------------------------

def _listening_inodes() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket (IPv4 and IPv6)."""
    found = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != "0A":  # 0A: LISTEN
                continue
            addr_hex, port_hex = cols[1].split(":")
            raw = bytes.fromhex(addr_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found[int(cols[9])] = (str(ipaddress.ip_address(raw)), int(port_hex, 16))
    return found


def listening_sockets(pids) -> list[tuple[int, str, int]]:
    """(pid, address, port) of the TCP sockets these processes listen on."""
    inodes = _listening_inodes()
    result = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:[") and (inode := int(target[8:-1])) in inodes:
                    result.append((pid, *inodes[inode]))
    return sorted(set(result))


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


# --- the deployment ---------------------------------------------------------------------

def deployment_env(home: Path, metadata_url: str, port: int, catalog_url: str, warehouse: Path,
                   username: str, password_file: Path, jwt_secret: str,
                   spark_master: str = "local[2]") -> dict:
    env = airflow_env(home, catalog_url, warehouse, spark_master=spark_master)
    env.update({
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
        # the Layouts pages (plugins/layouts_plugin.py), served by the api-server under /layouts
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{port}/execution/",
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{username}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(password_file),
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        # no health-check server, and were it on, only on loopback
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": HOST,
        # task logs at INFO: spark-submit's output is what a failure needs
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
    })
    if importlib.util.find_spec("asyncpg") is None:
        # Airflow derives a postgresql+asyncpg URL for its async engine, and asyncpg is
        # not a dependency of ours: without an async URL only the features that need it
        # (the dag-run wait endpoint, the async task state store) are unavailable.
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] = ""
    return env


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"({path} missing)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Deployment:
    """A running deployment: its URL, login and processes, and REST helpers."""

    home: Path
    url: str
    username: str
    password: str
    env: dict
    pids: dict[str, int]
    processes: list[subprocess.Popen] = field(default_factory=list)
    listeners_seen: set[tuple[int, str, int]] = field(default_factory=set)
    _token: str | None = None

    # -- REST
    def request(self, method: str, path: str, body=None, token: str | None | bool = True,
                timeout: float = 30) -> tuple[int, object]:
        """(status, decoded JSON body or text). token=True: the user's JWT; None/False: no
        Authorization header; a string: that token."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if token is True:
            token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
        # a loaded machine can leave the api-server silent past the timeout; a GET changes
        # nothing, so it is asked again rather than failing the caller's wait
        attempts = GET_ATTEMPTS if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                with opener.open(req, timeout=timeout) as response:
                    status, raw = response.status, response.read()
                break
            except urllib.error.HTTPError as e:
                status, raw = e.code, e.read()
                break
            except (TimeoutError, ConnectionResetError, urllib.error.URLError) as e:
                # a refused connection (a server not up yet) is the caller's to wait for
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                if attempt == attempts or not isinstance(reason, (TimeoutError, ConnectionResetError)):
                    raise
                print(f"{method} {path}: {e!r} after {timeout:g} s, asking again "
                      f"({attempt + 1} of {attempts})", file=sys.stderr)
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode(errors="replace")

    def token(self) -> str:
        """A JWT for the user (POST /auth/token), cached."""
        if self._token is None:
            status, body = self.request("POST", "/auth/token",
                                        {"username": self.username, "password": self.password}, token=None)
            if status not in (200, 201) or not isinstance(body, dict) or "access_token" not in body:
                raise ToolError(f"POST /auth/token gave {status}: {body}")
            self._token = body["access_token"]
        return self._token

    def health(self) -> dict:
        status, body = self.request("GET", "/api/v2/monitor/health", token=None, timeout=10)
        if status != 200 or not isinstance(body, dict):
            raise ToolError(f"health endpoint gave {status}: {body}")
        return body

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> dict:
        """Wait until the DAG processor has parsed the DAG (GET /api/v2/dags/{dag_id})."""
        deadline = time.monotonic() + timeout
        status, body = None, None
        while time.monotonic() < deadline:
            self._check_processes()
            status, body = self.request("GET", f"/api/v2/dags/{_q(dag_id)}")
            if status == 200:
                return body
            time.sleep(3)
        raise ToolError(f"DAG {dag_id} not parsed within {timeout:.0f} s (last: {status} {body}); "
                        f"import errors: {self.request('GET', '/api/v2/importErrors')[1]}\n"
                        f"dag-processor log:\n{_tail(self.home / 'dag-processor.log')}")

    def trigger(self, dag_id: str, conf: dict, run_id: str | None = None) -> str:
        """Trigger a run with conf (POST /api/v2/dags/{dag_id}/dagRuns); returns its run id."""
        body = {"logical_date": datetime.now(timezone.utc).isoformat(), "conf": conf}
        if run_id:
            body["dag_run_id"] = run_id
        status, answer = self.request("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", body)
        if status not in (200, 201) or not isinstance(answer, dict):
            raise ToolError(f"triggering {dag_id} gave {status}: {answer}")
        return answer["dag_run_id"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        status, body = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances")
        if status != 200:
            return {"?": f"{status} {body}"}
        return {ti["task_id"]: ti["state"] for ti in body["task_instances"]}

    def run_log_folder(self, dag_id: str, run_id: str) -> Path:
        """Where a run's task logs are: task_id=<task>/attempt=<n>.log inside."""
        return self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"

    def task_log_tails(self, dag_id: str, run_id: str, lines: int = 25, only_failed: bool = True) -> str:
        """The last lines of the task logs of a run (from the logs folder)."""
        run_dir = self.run_log_folder(dag_id, run_id)
        states = self.task_states(dag_id, run_id)
        parts = []
        for log in sorted(run_dir.glob("task_id=*/attempt=*.log")):
            task_id = log.parent.name.removeprefix("task_id=")
            if only_failed and states.get(task_id) == "success":
                continue
            parts.append(f"--- {task_id} {log.name} ---\n{_tail(log, lines)}")
        return "\n".join(parts) or f"(no task logs under {run_dir})"

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900, poll: float = 5) -> str:
        """Wait until the run is success or failed; raise ToolError (task states and log
        tails) unless it succeeded. Records the deployment's listening sockets meanwhile."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            self._check_processes()
            self.listeners_seen.update(self.listening())
            status, body = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
            state = body.get("state") if status == 200 and isinstance(body, dict) else None
            if state == "success":
                return state
            if state == "failed":
                break
            time.sleep(poll)
        what = "failed" if state == "failed" else f"did not finish within {timeout:.0f} s (state {state})"
        raise ToolError(f"DAG run {dag_id} {run_id} {what}; tasks: {self.task_states(dag_id, run_id)}\n"
                        f"{self.task_log_tails(dag_id, run_id)}\n"
                        f"--- scheduler.log ---\n{_tail(self.home / 'scheduler.log', 15)}")

    # -- processes and sockets
    def _check_processes(self) -> None:
        dead = [name for name, pid in self.pids.items() if not alive(pid)]
        reap(self.processes)
        if dead:
            tails = "\n".join(f"--- {name}.log ---\n{_tail(self.home / f'{name}.log')}" for name in dead)
            raise ToolError(f"Airflow component(s) {', '.join(dead)} exited:\n{tails}")

    def listening(self) -> list[tuple[int, str, int]]:
        """(pid, address, port) of every socket the deployment's processes listen on."""
        return listening_sockets(process_tree(list(self.pids.values())))

    def assert_loopback_only(self) -> list[tuple[int, str, int]]:
        """Raise unless every socket seen listening (now and during waits) is on loopback."""
        now = self.listening()
        self.listeners_seen.update(now)
        outside = sorted(s for s in self.listeners_seen if not is_loopback(s[1]))
        if outside:
            raise ToolError(f"Airflow processes listen beyond loopback: {outside}")
        return now

    def stop(self, timeout: float = 30) -> None:
        stop_components(self.pids, timeout=timeout, processes=self.processes)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def start(home: Path, metadata_url: str, catalog_url: str, warehouse: Path, port: int | None = None,
          username: str = "admin", password: str | None = None, spark_master: str = "local[2]",
          timeout: float = 300) -> Deployment:
    """Migrate the metadata database, start the four components (logs in `home`), and
    wait until the health endpoint reports every one healthy. On failure everything
    started is stopped again."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    if not port_is_free(port):
        raise ToolError(f"port {port} on {HOST} is taken")
    password = password or secrets.token_urlsafe(12)
    password_file = home / "simple_auth_manager_passwords.json"
    password_file.write_text(json.dumps({username: password}) + "\n")
    password_file.chmod(0o600)
    env = deployment_env(home, metadata_url, port, catalog_url, Path(warehouse).resolve(), username,
                         password_file, secrets.token_urlsafe(64), spark_master=spark_master)
    migrate = subprocess.run([_airflow(), "db", "migrate"], env=env, cwd=home, capture_output=True, text=True)
    (home / "db-migrate.log").write_text(migrate.stdout + migrate.stderr)
    if migrate.returncode != 0:
        raise ToolError(f"airflow db migrate failed (exit {migrate.returncode}):\n{_tail(home / 'db-migrate.log')}")

    commands = {
        "api-server": ["api-server", "--host", HOST, "--port", str(port), "--workers", "1"],
        "scheduler": ["scheduler", "--skip-serve-logs"],
        "dag-processor": ["dag-processor"],
        "triggerer": ["triggerer", "--skip-serve-logs"],
    }
    deployment = Deployment(home=home, url=f"http://{HOST}:{port}", username=username, password=password,
                            env=env, pids={})
    try:
        for name in COMPONENTS:
            with (home / f"{name}.log").open("w") as log:
                process = subprocess.Popen([_airflow(), *commands[name]], env=env, cwd=home, stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            deployment.processes.append(process)
            deployment.pids[name] = process.pid
        _wait_healthy(deployment, timeout)
    except BaseException:
        deployment.stop()
        raise
    return deployment


def _wait_healthy(deployment: Deployment, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        deployment._check_processes()
        try:
            last = deployment.health()
            parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
            if all((last.get(p) or {}).get("status") == "healthy" for p in parts):
                return
        except (OSError, ToolError) as e:
            last = e
        time.sleep(2)
    tails = "\n".join(f"--- {name}.log ---\n{_tail(deployment.home / f'{name}.log', 15)}" for name in COMPONENTS)
    raise ToolError(f"Airflow not healthy within {timeout:.0f} s (last: {last}):\n{tails}")


@contextlib.contextmanager
def airflow_deployment(home: Path, metadata_url: str, catalog_url: str, warehouse: Path, **kwargs):
    """`start(...)`, yield the Deployment, stop every process whatever happened."""
    deployment = start(home, metadata_url, catalog_url, warehouse, **kwargs)
    try:
        yield deployment
    finally:
        deployment.stop()


# --- `make airflow` / `make airflow-stop` -----------------------------------------------

def _state_file(home: Path) -> Path:
    return home / "pids.json"


def _running(state: dict) -> dict[str, int]:
    """The recorded processes that are still the ones we started (pid and start time)."""
    return {name: p["pid"] for name, p in state["processes"].items()
            if alive(p["pid"]) and _start_time(p["pid"]) == p["start_time"]}


def cli_start(home: Path, database: str, port: int, server: str = PG_SERVER) -> int:
    state_file = _state_file(home)
    if state_file.exists():
        state = json.loads(state_file.read_text())
        if _running(state):
            print(f"Airflow is already running: {state['url']} (stop it with `make airflow-stop`)")
            return 0
    if error := pg_error(server):
        raise ToolError(f"PostgreSQL is not reachable at {server}: {error}")
    create_database(database, server, exist_ok=True)
    if not port_is_free(port):
        port = free_port()
    settings = load_settings()
    password = os.environ.get("LAYOUT_AIRFLOW_PASSWORD", "admin")
    deployment = start(home, database_url(database, server), settings.catalog_url, Path(settings.warehouse),
                       port=port, password=password)
    try:
        deployment.assert_loopback_only()
    except ToolError:
        deployment.stop()
        raise
    state = {"url": deployment.url, "database": database, "processes": {
        name: {"pid": pid, "start_time": _start_time(pid)} for name, pid in deployment.pids.items()}}
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    print(f"Airflow is up: {deployment.url}  login: {deployment.username} / {password}\n"
          f"  metadata: PostgreSQL database {database}; catalog: {masked_url(settings.catalog_url)}; "
          f"warehouse: {settings.warehouse}\n  logs: {home}/*.log; pids: {state_file}\n"
          f"  stop it with `make airflow-stop`")
    return 0


def cli_stop(home: Path) -> int:
    state_file = _state_file(home)
    if not state_file.exists():
        print("Airflow is not running (no pid file)")
        return 0
    state = json.loads(state_file.read_text())
    running = _running(state)
    stop_components(running)
    state_file.unlink()
    print(f"Airflow stopped ({', '.join(running) or 'nothing was running'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m layout_core.airflow.deployment",
                                     description="A local Airflow deployment on 127.0.0.1 (PostgreSQL metadata)")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--home", default=".layout/airflow", help="AIRFLOW_HOME, logs and the pid file")
    parser.add_argument("--database", default="layout_airflow", help="PostgreSQL database for Airflow's metadata")
    parser.add_argument("--port", type=int, default=int(os.environ.get("LAYOUT_AIRFLOW_PORT", "8080")),
                        help="api-server port on 127.0.0.1 (a free one if taken)")
    args = parser.parse_args(argv)
    home = Path(args.home).resolve()
    try:
        if args.action == "start":
            return cli_start(home, args.database, args.port)
        return cli_stop(home)
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
