"""`attnlab explore --classroom`: the addresses students type, their QR code, the answer cache,
and a busy explorer answering 429 (never a 5xx)."""

from __future__ import annotations

import io
import ipaddress
import re

import pytest
from fastapi.testclient import TestClient

from attnlab.cli import main as cli_main
from attnlab.web import app as web_app
from attnlab.web.app import create_app
from attnlab.web.classroom import CACHED_PATHS, AnswerCache, Classroom, ResponseCache, lan_addresses, qr_svg

LOCAL = "http://127.0.0.1"


def _decode_qr_svg(svg: str) -> list[str]:
    """Decode an SVG QR code with zxing-cpp after drawing it with segno's own matrix reader."""
    zxingcpp = pytest.importorskip("zxingcpp")
    # Rasterise the SVG's modules ourselves: each "M x y h w" run of the path is a dark run.
    from PIL import Image

    scale = int(re.search(r'transform="scale\((\d+)\)"', svg).group(1))
    width = int(re.search(r'width="(\d+)"', svg).group(1)) // scale
    image = Image.new("L", (width, width), 255)
    x = y = 0.0
    for cmd, a, b in re.findall(r"([Mmhv])(-?[\d.]+)(?:\s(-?[\d.]+))?", re.search(r' d="([^"]+)"', svg).group(1)):
        if cmd == "M":
            x, y = float(a), float(b)
        elif cmd == "m":
            x, y = x + float(a), y + float(b)
        elif cmd == "h":
            for i in range(int(float(a))):
                image.putpixel((int(x) + i, int(y - 0.5)), 0)
            x += float(a)
    big = image.resize((width * 8, width * 8), Image.NEAREST)
    return [r.text for r in zxingcpp.read_barcodes(big)]


def test_the_qr_code_decodes_to_the_printed_address():
    url = "http://192.0.2.7:8000/"
    assert _decode_qr_svg(qr_svg(url)) == [url]


def test_the_classroom_api_and_qr_code_name_the_addresses_printed():
    room = Classroom(port=8123, addresses=("192.0.2.7", "198.51.100.3"))
    client = TestClient(create_app(host="0.0.0.0", classroom=room), base_url=LOCAL)
    info = client.get("/api/classroom").json()
    assert info == {"enabled": True, "urls": ["http://192.0.2.7:8123/", "http://198.51.100.3:8123/"]}
    svg = client.get("/api/classroom/qr.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert _decode_qr_svg(svg.text) == ["http://192.0.2.7:8123/"]
    # The Host check stays on, and the printed addresses pass it.
    assert client.get("/", headers={"host": "192.0.2.7:8123"}).status_code == 200
    assert client.get("/", headers={"host": "evil.example:8123"}).status_code == 400


def test_without_classroom_there_is_no_qr_code():
    client = TestClient(create_app(), base_url=LOCAL)
    assert client.get("/api/classroom").json() == {"enabled": False, "urls": []}
    assert client.get("/api/classroom/qr.svg").status_code == 404


def test_lan_addresses_are_this_machines_non_loopback_ipv4_addresses():
    import shutil
    import subprocess

    found = lan_addresses()
    for address in found:
        ip = ipaddress.ip_address(address)
        assert ip.version == 4 and not ip.is_loopback
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command to compare with")
    listed = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    expected = {line.split()[3].split("/")[0] for line in listed.splitlines()} - {"127.0.0.1"}
    assert set(found) == {a for a in expected if not a.startswith("127.")}


def test_explore_classroom_listens_everywhere_and_prints_the_addresses(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(web_app, "serve", lambda models, **kw: seen.update(kw))
    monkeypatch.setattr("attnlab.web.classroom.lan_addresses", lambda: ["192.0.2.7"])
    assert cli_main(["explore", "--model", "minilm", "--classroom", "--port", "8124"]) == 0
    assert seen["host"] == "0.0.0.0"
    assert seen["classroom"].urls == ["http://192.0.2.7:8124/"]
    out = capsys.readouterr().out
    assert "students open:  http://192.0.2.7:8124/" in out
    # Only addresses one can type: the students' LAN address and the loopback for this machine's
    # own browser, never the wildcard the server listens on.
    assert "0.0.0.0" not in out
    assert "this machine:   http://127.0.0.1:8124/" in out
    assert {u for u in re.findall(r"http://[^\s/]+:\d+/", out)} == {"http://192.0.2.7:8124/", "http://127.0.0.1:8124/"}


@pytest.mark.parametrize(
    ("host", "listens", "students"),
    [
        (None, "0.0.0.0", ["http://192.0.2.7:8125/"]),
        ("0.0.0.0", "0.0.0.0", ["http://192.0.2.7:8125/"]),
        ("127.0.0.1", "127.0.0.1", ["http://127.0.0.1:8125/"]),
        ("192.0.2.9", "192.0.2.9", ["http://192.0.2.9:8125/"]),
    ],
)
def test_an_explicit_host_wins_over_classroom(monkeypatch, capsys, host, listens, students):
    # `benchmarks/classroom_load.py --explore-args=--classroom` passes --host 127.0.0.1: the class
    # is then served on the loopback alone, not on every interface.
    seen = {}
    monkeypatch.setattr(web_app, "serve", lambda models, **kw: seen.update(kw))
    monkeypatch.setattr("attnlab.web.classroom.lan_addresses", lambda: ["192.0.2.7"])
    given = ["--host", host] if host else []
    assert cli_main(["explore", "--model", "minilm", "--classroom", "--port", "8125", *given]) == 0
    assert seen["host"] == listens
    assert seen["classroom"].urls == students
    captured = capsys.readouterr()
    assert "0.0.0.0" not in captured.out
    if host == "127.0.0.1":
        assert "students open" not in captured.out and "this machine only" in captured.err
    else:
        assert "students open:  " + students[0] in captured.out


def test_without_classroom_the_default_host_is_the_loopback(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(web_app, "serve", lambda models, **kw: seen.update(kw))
    assert cli_main(["explore", "--model", "minilm", "--port", "8126"]) == 0
    assert seen["host"] == "127.0.0.1" and seen["classroom"] is None
    assert "http://127.0.0.1:8126/" in capsys.readouterr().out
    # Listening everywhere without --classroom still prints an address one can type.
    assert cli_main(["explore", "--model", "minilm", "--port", "8126", "--host", "0.0.0.0"]) == 0
    assert seen["host"] == "0.0.0.0"
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8126/" in out and "0.0.0.0" not in out


def test_classroom_serving_keeps_an_explicit_host(monkeypatch):
    monkeypatch.setattr("attnlab.web.classroom.lan_addresses", lambda: ["192.0.2.7"])
    assert Classroom.serving(None, 9000) == ("0.0.0.0", Classroom(port=9000, addresses=("192.0.2.7",)))
    assert Classroom.serving("127.0.0.1", 9000) == ("127.0.0.1", Classroom(port=9000, addresses=("127.0.0.1",)))
    assert Classroom.serving("::", 9000)[1].addresses == ("192.0.2.7",)


def test_answers_that_depend_only_on_the_request_are_computed_once():
    app = create_app()
    cache = app.state.answers
    client = TestClient(app, base_url=LOCAL)
    body = {"length": 5}
    assert "/api/mask" in CACHED_PATHS
    first = client.post("/api/mask", json=body)
    hits = cache.hits
    again = client.post("/api/mask", json=body)
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert cache.hits == hits + 1
    # Another body is another answer; a refused request is never kept.
    other = client.post("/api/mask", json={"length": 6})
    assert other.status_code == 200 and other.content != first.content
    for _ in range(2):
        assert client.post("/api/mask", json={"length": 0}).status_code == 422
    assert cache.hits == hits + 1
    # Security headers are still on a cached answer.
    assert again.headers["x-content-type-options"] == "nosniff"


def test_the_cache_stays_within_its_byte_budget():
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x" * 1000})

    store = AnswerCache(max_bytes=10_000)
    cache = ResponseCache(app, store, paths=frozenset({"/p"}))
    import asyncio

    async def call(body: bytes):
        out = io.BytesIO()

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            if message["type"] == "http.response.body":
                out.write(message["body"])

        await cache(
            {"type": "http", "method": "POST", "path": "/p", "headers": []},
            receive,
            send,
        )
        return out.getvalue()

    for n in range(50):
        assert asyncio.run(call(str(n).encode())) == b"x" * 1000
    assert store.size_bytes <= 10_000 and 0 < len(store) < 50


def test_warm_up_asks_every_widget_default_once_the_server_answers():
    from live_server import serving

    from attnlab.web.classroom import WARM_UP, warm_up

    with serving(create_app()) as port:
        statuses = warm_up(f"http://127.0.0.1:{port}", timeout_s=60)
    assert set(statuses) == {path for _, path in WARM_UP}
    # Every default is a valid request: 200, or 503 where a shipped model is not installed.
    assert all(code in (200, 503) for code in statuses.values()), statuses
