"""The nightly DAG under a real Airflow: api-server, scheduler (LocalExecutor), DAG
processor and triggerer on 127.0.0.1 with PostgreSQL metadata
(layout_core.airflow.deployment): the scheduler's own daily run from a landing
folder, a backfill of the day before (its sensor waits for that day's batch), a
monitor run triggered through the REST API; then the plugin's Layouts pages
through that api-server, and a screenshot of them in headless Chromium."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.helpers.deployment import http_get, wait_for_runs
from tests.helpers.tpch_layouts import lineitem_1995_conf, write_landing_day

pytestmark = pytest.mark.slow


class Chromium:
    """Headless Chromium driven through the DevTools protocol over a pipe
    (`--remote-debugging-pipe`: it reads commands on fd 3 and answers on fd 4, each
    message JSON ended by a NUL). A plain `chromium --screenshot=...` cannot send
    Airflow's credentials; this way the page gets the `_token` cookie, as in the UI."""

    def __init__(self, width: int = 1400, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="layout-chromium-")
        cmd_read, self._cmd_write = os.pipe()
        self._out_read, out_write = os.pipe()

        def as_fds_3_and_4():  # in the child, before exec
            high_in = fcntl.fcntl(cmd_read, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(out_write, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--window-size={width},{height}", f"--user-data-dir={self.profile}", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "about:blank"],
            pass_fds=(3, 4, cmd_read, out_write), preexec_fn=as_fds_3_and_4,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_read)
        os.close(out_write)
        self.size = (width, height)
        self._next_id, self._buffer, self._events = 0, b"", []

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._out_read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._out_read, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_for(self, event: str, session: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, message in enumerate(self._events):
                if message.get("method") == event and message.get("sessionId") == session:
                    return self._events.pop(i)
            self._events.append(self._message(deadline))

    def open(self, url: str, cookies: list[dict] = ()) -> str:
        """Load url (with these cookies) in a new tab; its session id once the page has loaded."""
        if cookies:
            self.send("Storage.setCookies", {"cookies": list(cookies)})
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        width, height = self.size
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)  # after the images are loaded
        return session

    def evaluate(self, session: str, expression: str):
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
        return answer["result"].get("value")

    def capture(self, session: str, out) -> None:
        """A PNG of the tab's window."""
        out.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]))

    def screenshot(self, url: str, out, cookies: list[dict] = ()) -> dict:
        """Load url, write a PNG of the window to out, and return the page's HTML and its
        images (src, complete, natural width) as it was shot."""
        session = self.open(url, cookies)
        state = self.evaluate(session, "JSON.stringify({html: document.documentElement.outerHTML, images: "
                                       "Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, "
                                       "i.naturalWidth])})")
        self.capture(session, out)
        return json.loads(state)

    def frame_html(self, session: str, needle: str, timeout: float = 60) -> str:
        """The HTML of the page's (same-origin) iframe once it holds needle: the Airflow UI is a
        React app that builds the frame of a plugin view after its own requests."""
        deadline = time.monotonic() + timeout
        found = ""
        while time.monotonic() < deadline:
            found = self.evaluate(session, "(() => { const f = document.querySelector('iframe'); return f && "
                                           "f.contentDocument ? f.contentDocument.documentElement.outerHTML : ''; })()")
            if needle in (found or ""):
                time.sleep(1)  # its images
                return found
            time.sleep(0.5)
        raise AssertionError(f"no iframe with {needle!r} within {timeout:.0f} s; last: {(found or '')[:300]!r}")

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._cmd_write)
        os.close(self._out_read)
        shutil.rmtree(self.profile, ignore_errors=True)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_deployment_runs_the_nightly_dag_by_its_schedule_and_backfills_past_days(
        metadata_url, tmp_path, tpch_sf001, monkeypatch):
    from datetime import datetime, timedelta, timezone

    # layout_nightly unattended: daily, its batch from a landing folder named by the run's date
    landing = tmp_path / "landing" / "lineitem"
    conf = lineitem_1995_conf(tpch_sf001, tmp_path, instances=6)
    monkeypatch.setenv("LAYOUT_NIGHTLY_SCHEDULE", "@daily")
    monkeypatch.setenv("LAYOUT_NIGHTLY_SOURCE", f"{landing}/dt={{{{ ds }}}}")
    monkeypatch.setenv("LAYOUT_NIGHTLY_PARAMS", json.dumps(
        {"optimizer": "qdtree", "block_rows": 1000, "query_log": conf["query_log"]}))
    monkeypatch.setenv("LAYOUT_NIGHTLY_WAIT_TIMEOUT", "600")
    monkeypatch.setenv("LAYOUT_NIGHTLY_POKE_INTERVAL", "2")
    # the scheduler starts the run of yesterday (UTC) by itself (catchup off: that day only);
    # a batch for yesterday and, in case the test runs across midnight, for today; none for the
    # day before, which a backfill plans and whose sensor then waits
    today = datetime.now(timezone.utc).date()
    rows = {str(today - timedelta(days=back)): write_landing_day(tpch_sf001, landing,
                                                                 str(today - timedelta(days=back)), "1995")
            for back in (1, 0)}

    if shutil.which("chromium") is None:
        pytest.fail("the Layouts screenshot needs Debian's chromium: `make chromium` installs it")

    from layout_core.airflow.dag_run import _airflow
    from layout_core.airflow.deployment import airflow_deployment, is_loopback
    from layout_core.catalog import Catalog

    warehouse = tmp_path / "warehouse"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    started = time.monotonic()
    with airflow_deployment(tmp_path / "airflow", metadata_url, catalog_url, warehouse) as airflow:
        # nothing listens beyond loopback, and the log servers are not started
        listening = airflow.assert_loopback_only()
        assert [port for _, _, port in listening] == [int(airflow.url.rsplit(":", 1)[1])], listening
        assert airflow.env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        # the REST API wants a token
        for method, path in (("GET", "/api/v2/dags"), ("POST", "/api/v2/dags/layout_nightly/dagRuns")):
            status, _ = airflow.request(method, path, {"logical_date": None} if method == "POST" else None,
                                        token=None)
            assert status in (401, 403), (method, path, status)
        assert airflow.request("GET", "/api/v2/dags", token="not-a-jwt")[0] in (401, 403)

        dag = airflow.wait_for_dag("layout_nightly", timeout=300)
        assert dag["is_paused"] is False
        # nobody triggers it: the scheduler makes the day's run, its sensor finds the batch
        scheduled = wait_for_runs(airflow, "layout_nightly", "scheduled", 1, timeout=120)[0]
        run_id = scheduled["dag_run_id"]
        assert airflow.wait_for_run("layout_nightly", run_id, timeout=900) == "success"
        states = airflow.task_states("layout_nightly", run_id)
        assert set(states.values()) == {"success"} and len(states) == 8, states  # wait_for_input + 7 steps
        scheduled_day = scheduled["logical_date"][:10]
        assert scheduled_day in rows, scheduled

        # past days: a backfill (the CLI the README shows) over the day before and the scheduled
        # day makes one run, for the day that has none; the scheduler starts it, and its sensor
        # waits for that day's batch, which has not landed (a landed day runs as the one above)
        day_before = str(datetime.fromisoformat(scheduled_day).date() - timedelta(days=1))
        backfill = subprocess.run(
            [_airflow(), "backfill", "create", "--dag-id", "layout_nightly", "--from-date", day_before,
             "--to-date", scheduled_day, "--max-active-runs", "1"],
            env=airflow.env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert backfill.returncode == 0, backfill.stdout[-2000:] + backfill.stderr[-3000:]
        (backfilled,) = wait_for_runs(airflow, "layout_nightly", "backfill", 1, timeout=60)
        assert backfilled["logical_date"][:10] == day_before, backfilled
        wait_for_task_log(airflow, "layout_nightly", backfilled["dag_run_id"], "wait_for_input",
                          f"waiting for the batch of lineitem {day_before}: {landing}/dt={day_before} does not exist",
                          timeout=300)
        states = airflow.task_states("layout_nightly", backfilled["dag_run_id"])
        assert states.pop("wait_for_input") == "running" and set(states.values()) == {None}, states
        # ended here, so that its sensor stops poking while the test goes on
        status, body = airflow.request("PATCH", f"/api/v2/dags/layout_nightly/dagRuns/"
                                       f"{urllib.parse.quote(backfilled['dag_run_id'], safe='')}", {"state": "failed"})
        assert status == 200 and body["state"] == "failed", (status, body)
        check_layouts_pages(airflow, run_id, tmp_path)
        # the workload DAGs are there too; a monitor run on an empty history measures and stays quiet
        assert airflow.wait_for_dag("layout_reoptimize", timeout=120)["is_paused"] is False
        monitor_run = airflow.trigger("layout_workload_monitor", {"tables": "lineitem"})
        assert airflow.wait_for_run("layout_workload_monitor", monitor_run, timeout=600) == "success"
        status, xcom = airflow.request(
            "GET", f"/api/v2/dags/layout_workload_monitor/dagRuns/{urllib.parse.quote(monitor_run, safe='')}"
                   "/taskInstances/emit_shift_events/xcomEntries/return_value")
        assert status == 200, xcom
        numbers = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
        assert numbers["lineitem"]["reorganize"] is False and "too few" in numbers["lineitem"]["reason"]
        # every socket seen while the run went on (spark-submit's JVMs too) was on loopback
        airflow.assert_loopback_only()
        assert all(is_loopback(address) for _, address, _ in airflow.listeners_seen)
        pids = dict(airflow.pids)
    print(f"deployment, run and stop: {time.monotonic() - started:.0f} s")
    from layout_core.airflow.processes import alive

    assert not any(alive(pid) for pid in pids.values())

    # a version for the day that ran, holding that day's batch, in blocks; none for the day still waiting
    with Catalog(catalog_url) as catalog:
        (version,) = catalog.versions("lineitem", scheduled_day)
        assert version.state == "active" and version.optimizer == "qdtree"
        layout = catalog.active_layout("lineitem", scheduled_day)
        assert sum(b.row_count for b in layout.blocks) == rows[scheduled_day] and len(layout.blocks) > 1
        assert catalog.versions("lineitem", day_before) == []


def wait_for_task_log(airflow, dag_id: str, run_id: str, task_id: str, text: str, timeout: float) -> None:
    """Wait until the log of the task's first attempt holds `text`."""
    log = airflow.run_log_folder(dag_id, run_id) / f"task_id={task_id}" / "attempt=1.log"
    deadline = time.monotonic() + timeout
    while not (log.exists() and text in log.read_text(errors="replace")):
        assert time.monotonic() < deadline, (f"{task_id}'s log has no {text!r} after {timeout:.0f} s: "
                                             f"{airflow.task_states(dag_id, run_id)}")
        time.sleep(1)


def check_layouts_pages(airflow, run_id: str, tmp_path) -> None:
    """The plugin's pages through the real api-server: registered, behind Airflow's login
    (JWT header or the UI's `_token` cookie), showing the catalog and this DAG run; and a
    screenshot of the tables page in headless Chromium, authenticated by that cookie."""
    import matplotlib.image

    from layout_core.flows.names import NIGHTLY_STEPS as STEPS

    status, plugins = airflow.request("GET", "/api/v2/plugins")
    assert status == 200, plugins
    (ours,) = [p for p in plugins["plugins"] if p["name"] == "layouts"]
    assert [app["url_prefix"] for app in ours["fastapi_apps"]] == ["/layouts"]
    assert {v["destination"]: v["href"] for v in ours["external_views"]} == {
        "nav": "layouts/", "dag_run": "layouts/run?dag_id={DAG_ID}&run_id={RUN_ID}"}

    run_path = "/layouts/run?" + urllib.parse.urlencode({"dag_id": "layout_nightly", "run_id": run_id})
    pages = ("/layouts/", run_path, "/layouts/skipping", "/layouts/plot/table.png?name=lineitem",
             run_path.replace("/run?", "/plot/run-seconds.png?"))
    for path in pages:  # no token, a bad one, a bad cookie
        for headers in ({}, {"Authorization": "Bearer not-a-jwt"}, {"Cookie": "_token=not-a-jwt"}):
            status, body, _ = http_get(airflow.url + path, headers)
            assert status in (401, 403), (path, headers, status)
            assert b"lineitem" not in body
    bearer = {"Authorization": f"Bearer {airflow.token()}"}
    cookie = {"Cookie": f"_token={airflow.token()}"}
    status, body, kind = http_get(airflow.url + "/layouts/", bearer)
    page = body.decode()
    assert status == 200 and kind.startswith("text/html"), (status, page[:500])
    assert "Table <code>lineitem</code>" in page and "qdtree" in page and "state-active" in page
    assert "sqlite" not in page and str(tmp_path) not in page  # no connection string, no local paths
    status, body, _ = http_get(airflow.url + run_path, cookie)  # the UI's cookie works as well
    page = body.decode()
    assert status == 200, page[:500]
    assert all(f"<td>{step}</td>" in page for step in STEPS), page
    assert "passed" in page and "Catalog version" in page
    for path in pages[2:]:
        status, body, kind = http_get(airflow.url + path, bearer)
        assert status == 200, (path, body[:300])
    status, body, kind = http_get(airflow.url + pages[3], bearer)
    assert kind == "image/png" and _png_size(body)[0] > 300

    # the tables page as a browser shows it, authenticated by the UI's cookie; then the
    # Airflow UI itself: the nav entry's page and the DAG run's tab frame the plugin's pages
    shot = tmp_path / "layouts_tables.png"
    ui_nav, ui_run = tmp_path / "airflow_ui_layouts.png", tmp_path / "airflow_ui_layout_run.png"
    chromium = Chromium(1400, 900)
    try:
        state = chromium.screenshot(airflow.url + "/layouts/", shot, cookies=[{
            "name": "_token", "value": airflow.token(), "url": airflow.url + "/", "path": "/",
            "httpOnly": True, "sameSite": "Lax"}])
        session = chromium.open(airflow.url + "/plugin/layouts")
        assert "Table <code>lineitem</code>" in chromium.frame_html(session, "Table <code>lineitem</code>")
        chromium.capture(session, ui_nav)
        session = chromium.open(f"{airflow.url}/dags/layout_nightly/runs/{urllib.parse.quote(run_id, safe='')}"
                                "/plugin/layout-run")
        framed = chromium.frame_html(session, "<td>update_catalog</td>")
        assert all(f"<td>{step}</td>" in framed for step in STEPS) and "passed" in framed
        chromium.capture(session, ui_run)
    finally:
        chromium.close()
    print(f"screenshots: {shot} (the Layouts tables page), {ui_nav} and {ui_run} (inside the Airflow UI)")
    assert "Table <code>lineitem</code>" in state["html"] and "<img class=\"plot\"" in state["html"]
    assert state["images"] and all(done and width > 0 for _, done, width in state["images"]), state["images"]
    data = shot.read_bytes()
    assert _png_size(data) == (1400, 900) and len(data) > 20_000
    pixels = matplotlib.image.imread(str(shot))
    colours = {tuple(p) for p in pixels[::7, ::7, :3].reshape(-1, 3).round(2).tolist()}
    assert pixels.std() > 0.05 and len(colours) > 30, "the screenshot is blank"
