"""SITE_DATA and the explorer's ``static/data/NAME``: each data file written once, on first ask,
and an unknown name a 404 naming the files there are."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from attnlab.web import site
from attnlab.web.app import create_app


def test_a_data_file_is_written_once_and_kept(tmp_path):
    calls = []

    def write(out):
        calls.append(out)
        out.write_text(json.dumps({"n": len(calls)}), encoding="utf-8")
        return out

    files = site.DataFiles({"x.json": write})
    first = files.file("x.json")
    assert json.loads(first.read_text()) == {"n": 1}
    assert files.file("x.json") == first and len(calls) == 1
    with pytest.raises(KeyError, match=r"no data file 'y.json'; the data files are \['x.json'\]"):
        files.file("y.json")


def test_the_lessons_data_files_are_registered():
    assert {"bottleneck-test.json", "bleu-by-length.json", "summary-examples.json"} <= set(site.SITE_DATA)
    assert {"rnn-plain", "rnn-attention", "facts-summarizer"} <= set(site.SITE_MODELS)


def test_the_explorer_serves_them_and_refuses_an_unknown_name():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.get("/static/data/summary-examples.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert len(r.json()["documents"]) == 3
    r = client.get("/static/data/nope.json")
    assert r.status_code == 404 and "no data file 'nope.json'" in r.json()["detail"]


def test_a_model_not_built_here_is_a_503_naming_it(monkeypatch, tmp_path):
    import attnlab.assets as assets_module

    monkeypatch.setattr(assets_module, "ROOT", tmp_path)  # an installation whose assets are not built
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.get("/static/models/rnn-plain/meta.json")
    assert r.status_code == 503 and "rnn-plain" in r.json()["detail"], r.text
