"""Safe by default: every refusal is a JSON error with the command line's exit code and a
4xx status, never a crash; no write endpoints; bounded bodies, results and SQL time."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from lineage.api import open_store
from lineage.serve.app import create_app
from lineage.serve.errors import HTTPProblem
from lineage.serve.limits import Limits

from ..conftest import Cli
from .conftest import WAIT, LiveServer


def _error(response: httpx.Response, status: int, exit_code: int = 2) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "exit_code"}
    assert body["exit_code"] == exit_code
    assert "\n" not in body["error"] and body["error"]
    return str(body["error"])


@pytest.mark.parametrize(("path", "status", "words"), [
    ("/api/docs", 400, "'step' is required"),
    ("/api/docs?step=two", 400, "must be an integer"),
    ("/api/docs?step=-1", 400, "at least 0"),
    ("/api/docs?step=1&step=2", 400, "given 2 times"),
    ("/api/docs?step=99999999999999999999999", 400, "below 2^63"),
    ("/api/trained-on?hash=" + "0" * 64 + "&stream=" + "x" * 10, 404, "no stream named"),
    ("/api/sql?q=SELECT%201&timeout=nan", 400, "below 2^63"),
    ("/api/runs/tiny/checkpoints?nearest=1e3", 400, "must be an integer"),
    ("/api/docs?step=1&rank=0", 400, "--rank and --world-size go together"),
    ("/api/docs?step=1&rank=0&world_size=3", 400, "must divide the batch"),
    ("/api/docs?step=1&verbose=1", 400, "unknown parameter 'verbose'"),
    ("/api/docs?step=99999", 404, "has steps 0.."),
    ("/api/docs?step=1&stream=nope", 404, "no stream named 'nope'"),
    ("/api/corpora/nope", 404, "no corpus"),
    ("/api/runs/nope", 404, "no run named 'nope'"),
    ("/api/trace?run=tiny", 400, "exactly one"),
    ("/api/trace?run=tiny&skipped=true", 400, "give limit"),
    ("/api/trace?run=tiny&clipped=maybe", 400, "true or false"),
    ("/api/trained-on?hash=abc", 400, "64 hex digits"),
    ("/api/no/such/thing", 404, "Not Found"),
])
def test_bad_questions_are_json_errors(client: TestClient, path: str, status: int,
                                       words: str) -> None:
    assert words in _error(client.get(path), status)


def test_errors_keep_the_cli_message_and_exit_code(client: TestClient, demo_cli: Cli) -> None:
    """`checkpoints --nearest` with none before: the CLI's "no" (exit 1), a 404 here."""
    cli = demo_cli("run", "checkpoints", "tiny", "--nearest", "0", "--json", code=1)
    message = _error(client.get("/api/runs/tiny/checkpoints?nearest=0"), 404, exit_code=1)
    assert message in cli.stderr


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/api/corpora", "/api/docs?step=1", "/api/runs/tiny",
                                  "/openapi.json"])
def test_no_write_endpoints(client: TestClient, method: str, path: str) -> None:
    _error(client.request(method, path, content=b"x"), 405)


def test_sql_is_guarded_bounded_and_timed(demo_root: Path) -> None:
    limits = Limits(max_sql_rows=3)
    with TestClient(create_app(demo_root, limits=limits), base_url="http://localhost") as c:
        for query in ("DROP TABLE streams", "INSERT INTO corpora VALUES (1)",
                      "COPY documents TO '/tmp/x.csv'", "ATTACH '/tmp/x.db'"):
            assert "read-only" in _error(c.get("/api/sql", params={"q": query}), 400)
        assert "read" in _error(c.get("/api/sql", params={"q": "SELECT * FROM "
                                                          "read_text('/etc/passwd')"}), 400)
        rows = c.get("/api/sql", params={"q": "SELECT * FROM range(10)", "max_rows": 100})
        assert len(rows.json()) == 3  # a request may ask for less, never for more
        assert rows.headers["x-lineage-truncated"] == "only the first 3 rows"
        assert "not UTF-8" in _error(c.post("/api/sql", content=b"SELECT '\xff'"), 400)
        slow = "SELECT count(*) FROM range(10000000000) a"
        asked = c.get("/api/sql", params={"q": slow, "timeout": 0.2})
        assert "0.2 s time limit" in _error(asked, 400)


def _sql_helpers(app: Any) -> list[int]:
    """The SQL processes `app` has running, each checked to be one."""
    pids: list[int] = app.state.sql_processes.pids()
    for pid in pids:
        assert b"lineage.serve.sql_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return pids


@pytest.mark.skipif(sys.platform != "linux", reason="the process bound reads /proc")
def test_sql_runs_in_a_bounded_process_of_its_own(demo_root: Path) -> None:
    """A string of 3 GB made by one function call (DuckDB neither counts nor interrupts
    it) fails at once at the memory limit, in a process of its own: the server's own
    memory does not grow by it."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    app = create_app(demo_root)
    with TestClient(app, base_url="http://localhost") as c:
        huge = c.get("/api/sql", params={"q": "SELECT length(repeat('x', 3000000000))"})
        assert "SQL stopped at the 1 GiB memory limit" in _error(huge, 400)
        [helper] = _sql_helpers(app)
        again = c.get("/api/sql", params={"q": "SELECT count(*) AS n FROM documents"})
        with open_store(demo_root).reader() as con:  # the unguarded reader
            assert again.json() == [{"n": con.execute(
                "SELECT count(*) FROM documents").fetchone()[0]}]
        assert _sql_helpers(app) == [helper]  # kept for the next query
    assert _sql_helpers(app) == []  # stopped with the server
    assert not Path(f"/proc/{helper}").exists()
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - before
    assert grown < 1 << 30


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_query_the_interrupt_cannot_stop_ends_its_process(demo_root: Path) -> None:
    """`repeat` runs to its end inside one call whatever the interrupt says (about a
    second here); the helper ends itself `grace` after the time limit and the next query
    gets a new one."""
    from lineage.serve.sql_process import SqlProcesses

    app = create_app(demo_root)
    app.state.sql_processes = SqlProcesses(1, grace=0.01)
    with TestClient(app, base_url="http://localhost") as c:
        assert c.get("/api/sql", params={"q": "SELECT 1"}).status_code == 200
        [first] = _sql_helpers(app)
        long = c.get("/api/sql", params={"q": "SELECT length(repeat('x', 400000000))",
                                         "timeout": 0.05})
        assert "0.05 s time limit" in _error(long, 400)
        assert not Path(f"/proc/{first}").exists()  # ended, and waited for
        assert c.get("/api/sql", params={"q": "SELECT 1 AS one"}).json() == [{"one": 1}]
        [second] = _sql_helpers(app)
        assert second != first


def test_sql_waits_for_a_free_process_then_is_refused(demo_root: Path) -> None:
    """No more SQL processes than `sql_processes` at once: a request that finds them busy
    for `sql_timeout` seconds gets a 503 saying so."""
    import asyncio

    from lineage.serve.sql_process import SqlProcesses

    async def ask_while_busy() -> str:
        processes = SqlProcesses(1)
        processes._slots = asyncio.Semaphore(0)  # the one process is answering another
        with pytest.raises(HTTPProblem) as refused:
            await processes.answer(str(demo_root), "SELECT 1", timeout=1, max_rows=1,
                                   max_memory=1 << 30, wait=0.01)
        assert refused.value.status == 503 and refused.value.headers["Retry-After"] == "1"
        return str(refused.value)

    assert "1 SQL process(es) stayed busy for 0.01 s" in asyncio.run(ask_while_busy())


def test_sql_answers_from_several_clients_at_once_use_one_process(demo_root: Path) -> None:
    """Six clients at once, a real server: every one answered, by one SQL process."""
    import threading

    answers: list[int] = []
    seen: set[int] = set()
    with LiveServer(demo_root) as server:
        app = server.server.config.app

        def ask() -> None:
            answer = httpx.get(f"{server.url}/api/sql", timeout=WAIT,
                               params={"q": "SELECT count(*) FROM documents"})
            answers.append(answer.status_code)
            seen.update(_sql_helpers(app))

        clients = [threading.Thread(target=ask) for _ in range(6)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(WAIT)
        assert answers == [200] * 6
        assert len(seen) == 1 and _sql_helpers(app) == list(seen)


def test_serve_takes_the_sql_memory_limit(monkeypatch: pytest.MonkeyPatch,
                                          demo_root: Path) -> None:
    from lineage.serve.app import ROOT_ENV, SQL_MEMORY_ENV, app_from_environment

    monkeypatch.setenv(ROOT_ENV, str(demo_root))
    monkeypatch.setenv(SQL_MEMORY_ENV, str(256 << 20))
    with TestClient(app_from_environment(), base_url="http://localhost") as c:
        assert c.app.state.limits.max_sql_memory == 256 << 20  # type: ignore[attr-defined]
        big = c.get("/api/sql", params={"q": "SELECT length(repeat('x', 300000000))"})
        assert "SQL stopped at the 256 MiB memory limit" in _error(big, 400)


def test_oversized_and_malformed_bodies_get_a_clear_4xx(demo_root: Path) -> None:
    limits = Limits(max_body_bytes=1000, max_query_length=200)
    with TestClient(create_app(demo_root, limits=limits), base_url="http://localhost") as c:
        assert "larger than 1,000 bytes" in _error(
            c.post("/api/trained-on", content=b"x" * 1001), 413)

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            for _ in range(5):
                yield b"y" * 400

        assert "larger than" in _error(c.post("/api/trained-on", content=chunks()), 413)
        assert "query string" in _error(c.get("/api/docs?step=1&stream=" + "s" * 300), 414)
        broken = c.post("/api/trained-on", content=b"--nope\r\ngarbage",
                        headers={"content-type": "multipart/form-data; boundary=b"})
        assert "malformed multipart body" in _error(broken, 400)
        empty = c.post("/api/trained-on", files={"text": ("a.txt", b"x")})
        assert "must be text" in _error(empty, 400)
        field = c.post("/api/trained-on", files={"other": ("a.txt", b"x")})
        assert "unknown form field" in _error(field, 400)
        assert c.post("/api/trained-on", content=b"x" * 1000).status_code == 200


def test_host_header_must_name_this_server(demo_root: Path) -> None:
    """A page elsewhere that rebinds its name to 127.0.0.1 sends its own name as Host."""
    with TestClient(create_app(demo_root), base_url="http://evil.example") as c:
        assert "not a name of this server" in _error(c.get("/api/corpora"), 400)
    app = create_app(demo_root, allowed_hosts=["lineage.internal"])
    with TestClient(app, base_url="http://lineage.internal:8000") as c:
        assert c.get("/api/corpora").status_code == 200


def test_bearer_token(demo_root: Path) -> None:
    token = "t0ken-of-twenty-chars"
    with TestClient(create_app(demo_root, token=token), base_url="http://localhost") as c:
        refused = c.get("/api/corpora")
        assert "bearer token" in _error(refused, 401)
        assert refused.headers["www-authenticate"] == "Bearer"
        _error(c.get("/api/corpora", headers={"Authorization": "Bearer wrong"}), 401)
        _error(c.get("/openapi.json"), 401)
        _error(c.get("/api/corpora", headers={"Authorization": f"Basic {token}"}), 401)
        _error(c.get("/api/corpora", headers={"Authorization": f"Bearer {token}x"}), 401)
        assert c.get("/health").json() == {"ok": True}  # a readiness check needs none
        for scheme in ("Bearer", "bearer"):  # the scheme's case does not matter (RFC 9110)
            good = c.get("/api/corpora", headers={"Authorization": f"{scheme} {token}"})
            assert good.status_code == 200


def test_a_real_server_survives_a_malformed_request(demo_root: Path) -> None:
    """Bytes that are not HTTP, then a normal request on the same server."""
    import socket

    with LiveServer(demo_root) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as raw:
            raw.sendall(b"GARBAGE \x00\xff HTTP/9\r\n\r\n")
            reply = raw.recv(1000)
        assert reply.startswith(b"HTTP/1.1 400")
        response = httpx.get(f"{server.url}/api/docs?step=1", timeout=WAIT)
        assert response.status_code == 200


def test_a_real_server_parses_in_c_on_uvloop_without_nagle(demo_root: Path) -> None:
    """What docs/serve.md says the server runs on: uvicorn's httptools protocol on uvloop,
    TCP_NODELAY set on every connection it accepts."""
    import socket

    import uvloop

    from lineage.serve.tcp import NoDelayHttpToolsProtocol

    with LiveServer(demo_root) as server, httpx.Client() as client:
        assert client.get(f"{server.url}/api/streams").status_code == 200  # kept alive
        [connection] = server.server.server_state.connections
        assert type(connection) is NoDelayHttpToolsProtocol
        assert isinstance(connection.loop, uvloop.Loop)
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_serve_refuses_a_public_bind_without_token(demo_cli: Cli, tmp_path: Path) -> None:
    result = demo_cli("serve", "--host", "0.0.0.0", code=2)
    assert "--token-file" in result.stderr
    short = tmp_path / "token"
    short.write_text("short\n")
    result = demo_cli("serve", "--host", "0.0.0.0", "--token-file", str(short), code=2)
    assert "at least 16 characters" in result.stderr
    result = demo_cli("serve", "--token-file", str(tmp_path / "missing"), code=2)
    assert "cannot read the token" in result.stderr


@pytest.mark.slow
def test_lineage_serve_command(demo_root: Path, tmp_path: Path) -> None:
    """The real command: two worker processes behind one port, a token, then Ctrl-C."""
    import signal

    from ..conftest import spawn_lineage
    from .conftest import first_answer, free_port

    token = tmp_path / "token"
    token.write_text("a-token-of-enough-length\n")
    port = free_port()
    server = spawn_lineage("--store", str(demo_root), "serve", "--port", str(port),
                           "--token-file", str(token), "--workers", "2")
    try:
        url = f"http://127.0.0.1:{port}/api/streams/main"
        _error(first_answer(server, url), 401)
        auth = {"Authorization": "Bearer a-token-of-enough-length"}
        for _ in range(4):  # whichever worker answers, the same answer
            answer = httpx.get(url, headers=auth, timeout=WAIT)
            assert answer.status_code == 200
            assert answer.json()["name"] == "main"
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=WAIT)
    assert f"at http://127.0.0.1:{port}/" in stderr
