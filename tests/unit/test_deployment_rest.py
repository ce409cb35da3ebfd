"""The deployment's REST helper against a small loopback server that stalls on purpose."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.error

import pytest

from layout_core.airflow.deployment import Deployment


class _StallingHandler(http.server.BaseHTTPRequestHandler):
    """Answers {"n": k} to the k-th request; the first `stalls` requests get no answer in time."""

    def _answer(self):
        server = self.server
        with server.lock:
            server.seen += 1
            n = server.seen
        if n <= server.stalls:
            server.release.wait(5)  # longer than the client's timeout
            return
        body = json.dumps({"n": n}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def stalling_server():
    def start(stalls: int):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StallingHandler)
        server.daemon_threads = True
        server.lock, server.seen, server.stalls = threading.Lock(), 0, stalls
        server.release = threading.Event()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    servers = []
    yield start
    for server in servers:
        server.release.set()
        server.shutdown()
        server.server_close()


def _deployment(port: int, tmp_path) -> Deployment:
    return Deployment(home=tmp_path, url=f"http://127.0.0.1:{port}", username="u", password="p", env={}, pids={})


def test_a_get_the_server_leaves_unanswered_is_asked_again(stalling_server, tmp_path, capsys):
    server = stalling_server(stalls=2)
    status, body = _deployment(server.server_port, tmp_path).request("GET", "/api/v2/dags", token=None, timeout=0.5)
    assert (status, body) == (200, {"n": 3})
    assert "asking again (3 of 3)" in capsys.readouterr().err


def test_a_get_unanswered_every_time_raises_the_timeout(stalling_server, tmp_path):
    server = stalling_server(stalls=3)
    with pytest.raises(TimeoutError):
        _deployment(server.server_port, tmp_path).request("GET", "/api/v2/dags", token=None, timeout=0.5)
    assert server.seen == 3


def test_a_post_is_never_sent_twice(stalling_server, tmp_path):
    # a POST that timed out may have been done: sending it again could trigger a second run
    server = stalling_server(stalls=1)
    with pytest.raises(TimeoutError):
        _deployment(server.server_port, tmp_path).request("POST", "/api/v2/dags/d/dagRuns",
                                                          {"logical_date": None}, token=None, timeout=0.5)
    assert server.seen == 1


def test_a_refused_connection_is_not_asked_again(tmp_path, capsys):
    # a server that is not up yet: _wait_healthy polls for it, and each poll fails at once
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once the socket is closed: nothing listens there
    with pytest.raises(urllib.error.URLError):
        _deployment(port, tmp_path).request("GET", "/api/v2/monitor/health", token=None, timeout=0.5)
    assert "asking again" not in capsys.readouterr().err
