"""The service is safe to expose: hostile bytes never reach a browser, the file system or a 5xx."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from guimem.service.http import create_app
from guimem.testing.server import live_http
from tests.service.conftest import KEY
from tests.service.test_core import request, service

H = {"Authorization": f"Bearer {KEY}"}
J = {**H, "Content-Type": "application/json"}


@pytest.fixture
def open_http(tmp_path, data_dir):
    """A server with no API key (the default)."""
    svc = service(tmp_path, data_dir=data_dir)
    with live_http(create_app(svc, max_body_bytes=200_000)) as url:
        yield url
    svc.close()


def test_a_symlinked_temp_file_cannot_redirect_an_export_outside_the_data_dir(http, data_dir, tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (data_dir / "exports").mkdir()
    (data_dir / "exports" / "evil.jsonl.tmp").symlink_to(outside)
    r = httpx.post(f"{http}/v1/export", json={"path": "evil.jsonl"}, headers=H)
    assert r.status_code == 200
    assert outside.read_text() == "keep me"
    assert json.loads((data_dir / "exports" / "evil.jsonl").read_text().splitlines()[0])["type"] == "header"
    link = data_dir / "exports" / "link.jsonl"
    link.symlink_to(outside)
    r = httpx.post(f"{http}/v1/export", json={"path": "link.jsonl"}, headers=H)
    assert r.status_code == 409 and "symbolic link" in r.json()["message"]
    assert outside.read_text() == "keep me" and link.is_symlink()


def test_the_data_dir_or_a_folder_as_path_is_a_typed_4xx_and_nothing_is_left_outside(http, data_dir):
    for route in ("export", "import"):
        for path in (".", "", str(data_dir), "../x.jsonl"):
            r = httpx.post(f"{http}/v1/{route}", json={"path": path}, headers=H)
            assert r.status_code == 422 and r.json()["error"] == "ValidationError", (route, path, r.text)
    (data_dir / "dir.jsonl").mkdir()
    (data_dir / "exports" / "dir.jsonl").mkdir(parents=True)
    for route in ("export", "import"):
        r = httpx.post(f"{http}/v1/{route}", json={"path": "dir.jsonl"}, headers=H)
        assert r.status_code == 409 and r.json()["error"] == "FileConflictError"
    assert not Path(str(data_dir) + ".tmp").exists()
    assert sorted(p.name for p in data_dir.parent.iterdir() if p.name.startswith("data")) == ["data"]


@pytest.mark.parametrize("body", [b'{"goal": "\\ud800", "observation": {"app": "a"}}',
                                  b'{"goal": "g", "observation": {"app": "a"}, "step": NaN}',
                                  b'{"goal": "g", "observation": {"app": "a"}, "step": Infinity}',
                                  b'{"goal": "\xff\xfe", "observation": {"app": "a"}}',
                                  b'{"goal": "g", "observation": {"app": "a"}, "step": -Infinity}'])
def test_lone_surrogates_nan_and_non_utf8_are_400_not_500(http, body):
    r = httpx.post(f"{http}/v1/recall", content=body, headers=J)
    assert r.status_code == 400 and r.json()["error"] == "BadRequest", r.text


def test_a_nul_byte_in_a_path_is_400(http):
    for path in ("/v1/runs/steer%00/0", "/v1/items/a%00b", "/v1/items/%00/history"):
        r = httpx.get(f"{http}{path}", headers=H)
        assert 400 <= r.status_code < 500 and set(r.json()) == {"error", "message", "suggestion"}, path


def test_an_oversized_chunked_body_is_refused_before_it_is_read(http):
    with socket.create_connection(("127.0.0.1", int(http.rsplit(":", 1)[1])), timeout=10) as sock:
        sock.sendall(b"POST /v1/recall HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 300_000
        sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")  # over the 200 kB limit; never finished
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_errors_have_one_shape_and_never_echo_the_input(http):
    huge = "y" * 150_000
    broken = httpx.post(f"{http}/v1/recall", content=('{"goal": "' + huge).encode(), headers=J)
    assert broken.status_code == 400 and set(broken.json()) == {"error", "message", "suggestion"}
    assert len(broken.content) < 1000
    invalid = httpx.post(f"{http}/v1/recall", json={"goal": huge, "observation": {"app": "a"}}, headers=J)
    assert invalid.status_code == 422 and set(invalid.json()) == {"error", "message", "suggestion"}
    assert len(invalid.content) < 1000 and "yyyy" not in invalid.text
    unknown = httpx.post(f"{http}/v1/recall", content=request().model_dump_json()[:-1] + ', "surprise": 1}',
                         headers=J)
    assert unknown.status_code == 422 and "surprise" in unknown.json()["message"]
    lax = json.loads(request().model_dump_json())
    lax["slot"] = False
    assert httpx.post(f"{http}/v1/recall", json=lax, headers=J).status_code == 422
    learn = httpx.post(f"{http}/v1/learn", json={"trajectories": [], "end_round": 0}, headers=J)
    assert learn.status_code == 422


def test_without_a_key_other_sites_and_other_hosts_are_refused(open_http):
    base = open_http
    assert httpx.get(f"{base}/v1/stats").status_code == 200
    for route in ("/v1/items/x/admit", "/v1/items/x/retire", "/v1/end_round"):
        plain = httpx.post(f"{base}{route}", content=b'{}', headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415, route
        cross = httpx.post(f"{base}{route}", json={}, headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403, route
    assert httpx.get(f"{base}/v1/stats", headers={"Host": "evil.example"}).status_code == 403
    assert httpx.get(f"{base}/v1/stats", headers={"Host": "evil.example:80"}).status_code == 403
    assert httpx.get(f"{base}/v1/stats", headers={"Host": "localhost:1234"}).status_code == 200
    assert httpx.get(f"{base}/v1/stats", headers={"Origin": "http://127.0.0.1:9"}).status_code == 200


def test_authorization_needs_the_bearer_scheme_and_end_round_takes_no_garbage(http):
    assert httpx.get(f"{http}/v1/stats", headers={"Authorization": KEY}).status_code == 401
    assert httpx.get(f"{http}/v1/stats", headers={"Authorization": f"Basic {KEY}"}).status_code == 401
    assert httpx.get(f"{http}/v1/stats", headers={"Authorization": f"bearer {KEY}"}).status_code == 200
    assert httpx.post(f"{http}/v1/end_round", content=b"garbage", headers=J).status_code == 400
    assert httpx.post(f"{http}/v1/end_round", json={"round": 3}, headers=J).status_code == 422
    assert httpx.post(f"{http}/v1/end_round", json={}, headers=J).status_code == 200


def test_every_response_carries_a_strict_csp_and_the_page_has_no_inline_script(http):
    page = httpx.get(f"{http}/")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert "<script>" not in page.text and "<style>" not in page.text
    assert not re.search(r"\son[a-z]+\s*=", page.text), "no inline event handlers"
    js = httpx.get(f"{http}/static/inspector.js").text
    code = "\n".join(line for line in js.splitlines() if not line.lstrip().startswith("//"))
    assert ".innerHTML" not in code and "localStorage" not in code and "sessionStorage" in code
    assert httpx.get(f"{http}/v1/stats", headers=H).headers["x-content-type-options"] == "nosniff"


def test_openapi_declares_the_security_schemes_and_the_statuses(http):
    schema = httpx.get(f"{http}/openapi.json").json()
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    admit = schema["paths"]["/v1/items/{item_id}/admit"]["post"]
    assert {"200", "401", "404", "409", "413", "415", "422"} <= set(admit["responses"])
    assert admit["security"] == [{"bearer": []}, {"apiKey": []}]
    assert schema["components"]["schemas"]["RecallRequest"]["additionalProperties"] is False


def test_serve_refuses_a_public_address_without_a_key_unless_insecure(tmp_path, monkeypatch):
    from guimem.cli.app import app

    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    monkeypatch.delenv("GUIMEM_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.sqlite"), "--http", "0.0.0.0:8765"])
    assert result.exit_code == 2 and "without an API key" in result.output and "--insecure" in result.output
    assert os.environ.get("GUIMEM_API_KEY") is None
