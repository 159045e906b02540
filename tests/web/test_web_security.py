"""The explorer's hardening: the Host check (DNS rebinding), security headers on every response,
strict JSON types, slow and oversized bodies, and limits checked before the server starts."""

from __future__ import annotations

import re
import select
import socket
import time

import pytest
import torch
from fastapi.testclient import TestClient
from live_server import serving

from attnlab.cli import main as cli_main
from attnlab.web import app as web_app
from attnlab.web.app import STATIC_DIR, create_app
from attnlab.web.models import ModelRun
from attnlab.web.security import SECURITY_HEADERS, AllowedHosts, Limits, check_address

LOCAL = "http://127.0.0.1:8000"


class EchoModel:
    """A stand-in model: answers at once (or fails, to provoke a 500)."""

    kind = "translator"

    def __init__(self, name: str = "echo", fail: bool = False) -> None:
        self.name, self.fail = name, fail

    def run(self, text: str) -> ModelRun:
        if self.fail:
            raise RuntimeError("the model broke")
        return ModelRun(output=text, tokens={"src": ["a"]}, attentions={"self": torch.ones(1, 1, 1, 1)})


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app([EchoModel()]), base_url=LOCAL)


# --------------------------------------------------------------------------------------------
# Host header (DNS rebinding).
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8000", "localhost", "localhost:8000", "LocalHost.", "[::1]", "[::1]:8000"]
)
def test_the_bound_address_and_loopback_names_are_served(client, host):
    for path in ("/", "/static/common.js", "/api/models"):
        r = client.get(path, headers={"host": host})
        assert r.status_code == 200, (host, path, r.text)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "localhost.evil.example",
        "127.0.0.1.nip.io:8000",
        "10.0.0.7",
        "[::1",
        "localhost:http",
        "a b",
        "",
    ],
)
def test_a_foreign_host_is_refused_with_400_and_a_message(client, host):
    for method, path, body in (
        ("GET", "/", None),
        ("GET", "/static/common.js", None),
        ("POST", "/api/playground", {"scores": [1, 2]}),
    ):
        r = client.request(method, path, json=body, headers={"host": host})
        assert r.status_code == 400, (host, path, r.text)
        detail = r.json()["detail"]
        assert "is not served here" in detail and "--allow-host" in detail, detail
        assert r.headers["x-content-type-options"] == "nosniff"


def test_allow_host_adds_names_and_star_turns_the_check_off():
    app = create_app(allow_hosts=["explorer.lan", "Lab.Example:8000"])
    c = TestClient(app, base_url="http://explorer.lan:8000")
    assert c.get("/").status_code == 200
    assert c.get("/", headers={"host": "lab.example"}).status_code == 200
    assert c.get("/", headers={"host": "127.0.0.1:8000"}).status_code == 200
    assert c.get("/", headers={"host": "other.lan"}).status_code == 400
    anything = TestClient(create_app(allow_hosts=["*"]), base_url="http://whatever.example")
    assert anything.get("/api/models").status_code == 200


def test_every_interface_serves_addresses_and_this_machine_but_no_other_name():
    hosts = AllowedHosts("0.0.0.0")
    for ok in ("192.168.1.20:8000", "[fe80::1]:8000", "localhost", socket.gethostname()):
        assert hosts.accepts(ok), ok
    for refused in ("evil.example", "evil.example:8000", None):
        assert not hosts.accepts(refused), refused
    assert AllowedHosts("::").accepts("10.1.2.3") and not AllowedHosts("::").accepts("rebind.example")
    # A specific address: that address and the loopback names only.
    lan = AllowedHosts("192.168.1.20")
    assert lan.accepts("192.168.1.20:8000") and lan.accepts("localhost") and not lan.accepts("192.168.1.21")


@pytest.mark.parametrize(
    "allow, message",
    [
        (["http://explorer.lan"], "without http://"),
        (["explorer.lan/path"], "host name"),
        ([""], "host name"),
        (["two words"], "host name"),
    ],
)
def test_a_bad_allowed_host_is_a_value_error(allow, message):
    with pytest.raises(ValueError, match=message):
        create_app(allow_hosts=allow)
    with pytest.raises(ValueError, match=message):
        check_address("127.0.0.1", 8000, allow)


# --------------------------------------------------------------------------------------------
# Security headers on every response.
# --------------------------------------------------------------------------------------------


def _assert_security_headers(r) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert r.headers.get(name) == value, (r.request.url, name, r.headers.get(name))


def test_security_headers_on_pages_assets_api_and_errors(client):
    responses = [
        client.get("/"),
        client.get("/model"),
        client.get("/masks"),
        client.get("/static/common.js"),
        client.get("/static/style.css"),
        client.get("/fonts/ipaexg.ttf"),
        client.get("/openapi.json"),
        client.get("/api/models"),
        client.post("/api/playground", json={"scores": [1, 2]}),
        client.get("/nowhere"),  # 404
        client.get("/static/nowhere.js"),  # 404 from the static files
        client.post("/api/playground", json={"scores": [1, 2], "d_k": "64"}),  # 422
        client.post("/api/mask", content=b"{bad", headers={"content-type": "application/json"}),  # 400
        client.post("/api/playground", content=b"1" * 70000, headers={"content-type": "application/json"}),  # 413
        client.get("/api/playground"),  # 405
        client.post("/api/run", json={"model": "nope", "text": "a"}),  # 404 from the API
    ]
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * 9 + [404, 404, 422, 400, 413, 405, 404], statuses
    for r in responses:
        _assert_security_headers(r)


def test_security_headers_even_on_an_unexpected_500():
    c = TestClient(create_app([EchoModel("broken", fail=True)]), base_url=LOCAL, raise_server_exceptions=False)
    r = c.post("/api/run", json={"model": "broken", "text": "a"})
    assert r.status_code == 500
    _assert_security_headers(r)


def test_the_policy_forbids_inline_script_framing_and_other_origins():
    csp = dict(part.strip().split(" ", 1) for part in SECURITY_HEADERS["Content-Security-Policy"].split(";"))
    assert csp["default-src"] == "'none'"
    # WebAssembly may compile (the in-page models); JavaScript eval stays forbidden.
    assert csp["script-src"] == "'self' 'wasm-unsafe-eval'" and csp["style-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'" and SECURITY_HEADERS["X-Frame-Options"] == "DENY"
    # No unsafe-inline / unsafe-eval anywhere: the one "unsafe" word allowed is WebAssembly's own.
    loose = {k: v.replace("'wasm-unsafe-eval'", "") for k, v in csp.items()}
    assert not any("unsafe" in v or "*" in v or "http" in v for v in loose.values()), csp


def test_static_files_need_no_inline_script_or_style():
    """What the policy would block: inline <script>/<style>, on* handlers, style="" attributes,
    javascript: URLs, and their equivalents built from JS (eval, innerHTML, a style attribute)."""
    for path in sorted(p for p in STATIC_DIR.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".html", ".svg"):
            assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text, re.IGNORECASE), path.name
            assert not re.search(r"<style\b", text, re.IGNORECASE), path.name
            assert not re.search(r"\s(on\w+|style)\s*=", text, re.IGNORECASE), path.name
            assert "javascript:" not in text.lower(), path.name
        if path.suffix == ".js":
            for pattern in (
                r"\beval\s*\(",
                r"new\s+Function\b",
                r"\.innerHTML\b",
                r"\.outerHTML\b",
                r"insertAdjacentHTML",
                r"setAttribute\(\s*[\"']style",
                r"[{,]\s*[\"']?style[\"']?\s*:",
                r"setTimeout\(\s*[\"'`]",
                r"javascript:",
            ):
                assert not re.search(pattern, text), (path.name, pattern)


# --------------------------------------------------------------------------------------------
# Strict types: a number must be a JSON number, a flag a JSON boolean.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/api/playground", {"scores": [1, 2], "d_k": "64"}, "d_k"),
        ("/api/playground", {"scores": [1, 2], "d_k": 64.0}, "d_k"),
        ("/api/playground", {"scores": [1, 2], "d_k": True}, "d_k"),
        ("/api/playground", {"scores": ["1", 2]}, "scores"),
        ("/api/playground", {"scores": [1, 2], "scale": "false"}, "scale"),
        ("/api/playground", {"scores": [1, 2], "scale": 0}, "scale"),
        ("/api/playground", {"query": ["1"], "keys": [[1]]}, "query"),
        ("/api/playground", {"query": [1], "keys": [["1"]]}, "keys"),
        ("/api/playground", {"scores": [1], "values": [["2"]]}, "values"),
        ("/api/mask", {"length": "8"}, "length"),
        ("/api/mask", {"length": 4, "key_length": "4"}, "key_length"),
        ("/api/mask", {"length": 4, "causal": "true"}, "causal"),
        ("/api/mask", {"length": 4, "window": "2"}, "window"),
        ("/api/mask", {"length": 4, "window_causal": 1}, "window_causal"),
        ("/api/mask", {"length": 4, "padding": 1.0}, "padding"),
        ("/api/mask", {"length": 4, "toggled": [["0", 1]]}, "toggled"),
        ("/api/run", {"model": "echo", "text": 3}, "text"),
        ("/api/run", {"model": 1, "text": "a"}, "model"),
    ],
)
def test_strings_as_numbers_and_other_loose_types_are_422(client, path, body, field):
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert any(field in e["loc"] for e in r.json()["detail"]), r.text


def test_json_numbers_still_work_where_floats_are_expected(client):
    assert client.post("/api/playground", json={"scores": [1, 2.5], "d_k": 4, "scale": False}).status_code == 200
    assert client.post("/api/mask", json={"length": 4, "toggled": [[0, 1]], "causal": False}).status_code == 200


# --------------------------------------------------------------------------------------------
# Slow and oversized bodies against a real server.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_port():
    limits = Limits(body_timeout_s=0.5, max_body_bytes=1000)
    with serving(create_app([EchoModel()], limits=limits)) as port:
        yield port


def _exchange(port: int, head: bytes, pieces: list[bytes], every_s: float = 0.1) -> tuple[bytes, float]:
    """Send ``head``, then ``pieces`` one by one ``every_s`` apart until the server answers; return
    everything it sent until it closed the connection, and the seconds that took."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head)
        for piece in pieces:
            if select.select([sock], [], [], every_s)[0]:
                break  # the server has answered
            try:
                sock.sendall(piece)
            except OSError:
                break  # it answered and closed in between
        answer = b""
        while True:  # the server must close: a timeout here fails the test
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                # A byte we sent just as the server closed reaches a closed socket and is answered
                # with RST (RFC 9293 §3.10.7.1). Linux keeps what had already arrived readable
                # before it reports the reset, so the answer is in ``answer`` and the asserts
                # below still judge it; a reset is a close too.
                break
            if not chunk:
                break
            answer += chunk
    return answer, time.monotonic() - start


def _head(port: int, extra: str, host: str | None = None) -> bytes:
    return (
        f"POST /api/playground HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def test_a_body_sent_slowly_gets_408_and_the_connection_closes(server_port):
    body = b'{"scores": [1, 2, 3, 4, 5, 6, 7, 8, 9]}'
    head = _head(server_port, f"Content-Length: {len(body)}\r\n")
    answer, seconds = _exchange(server_port, head, [bytes([b]) for b in body])  # 4 s if it were all read
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"not received within 0.5 s" in answer
    assert b"x-content-type-options: nosniff" in answer.lower()
    assert seconds < 3, seconds


def test_a_chunked_body_over_the_limit_is_413_while_it_streams(server_port):
    chunk = b"258\r\n" + b"1" * 600 + b"\r\n"  # 0x258 = 600 bytes
    head = _head(server_port, "Transfer-Encoding: chunked\r\n")
    answer, seconds = _exchange(server_port, head, [chunk] * 20)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"larger than 1000 bytes" in answer
    assert seconds < 3, seconds


def test_the_real_server_answers_its_own_address_and_refuses_another(server_port):
    body = b'{"scores": [1, 2]}'
    ok, _ = _exchange(
        server_port, _head(server_port, f"Content-Length: {len(body)}\r\nConnection: close\r\n") + body, []
    )
    assert ok.startswith(b"HTTP/1.1 200 "), ok[:200]
    assert b"content-security-policy: default-src 'none'" in ok.lower()
    foreign = _head(server_port, f"Content-Length: {len(body)}\r\nConnection: close\r\n", host="rebind.example")
    refused, _ = _exchange(server_port, foreign + body, [])
    assert refused.startswith(b"HTTP/1.1 400 ") and b"is not served here" in refused, refused[:300]


# --------------------------------------------------------------------------------------------
# Limits and the command's options: checked before anything starts.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_text_chars", 0),
        ("max_body_bytes", -1),
        ("max_concurrent", 0),
        ("max_concurrent", 1.5),
        ("max_waiting", -1),
        ("max_concurrent", True),
        ("wait_timeout_s", 0),
        ("body_timeout_s", float("nan")),
        ("body_timeout_s", float("inf")),
        ("wait_timeout_s", -3),
    ],
)
def test_limits_must_be_positive(field, value):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_limits_defaults_and_zero_waiting_are_fine():
    assert Limits().max_concurrent == 2 and Limits(max_waiting=0).max_waiting == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-concurrent", "0"], "max_concurrent must be a whole number of at least 1, got 0"),
        (["--max-text-chars", "0"], "max_text_chars must be a whole number of at least 1, got 0"),
        (["--max-concurrent", "-2"], "max_concurrent"),
        (["--port", "99999"], "port must be a whole number from 1 to 65535, got 99999"),
        (["--port", "-1"], "port must be"),
        (["--port", "0"], "port must be"),
        (["--allow-host", "http://lab.example/"], "without http://"),
        (["--host", ""], "host must be"),
        # Checked before the models are loaded: the port error wins over the missing folder.
        (["--model", "/nowhere/at/all", "--port", "70000"], "port must be"),
    ],
)
def test_explore_options_are_one_line_errors_before_anything_starts(monkeypatch, capsys, argv, message):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the explorer must not start")

    monkeypatch.setattr(web_app, "serve", must_not_run)
    assert cli_main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab: error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_explore_passes_allow_host_on(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(web_app, "serve", lambda models, **kwargs: seen.update(kwargs))
    assert cli_main(["explore", "--allow-host", "lab.example", "--allow-host", "x.lan", "--port", "8123"]) == 0
    assert list(seen["allow_hosts"]) == ["lab.example", "x.lan"] and seen["port"] == 8123
    assert "http://127.0.0.1:8123/" in capsys.readouterr().out


def test_serve_refuses_a_bad_port_itself():
    with pytest.raises(ValueError, match="port must be"):
        web_app.serve([], port=99999)
