"""Issue 29, items 2 and 3: header values and nesting that made a parser raise are a 400, never a 500."""

from __future__ import annotations

import httpx
import pytest

from guimem.service.http import create_app
from guimem.testing.server import live_http
from tests.service.test_core import service


@pytest.fixture(scope="module")
def open_url(tmp_path_factory):
    svc = service(tmp_path_factory.mktemp("hostile"), method="graph")
    with live_http(create_app(svc)) as url:
        yield url
    svc.close()


@pytest.mark.parametrize("origin", ["http://[::1", "http://[", "http://[zz]", "http://a]b", "https://[::1:80"])
@pytest.mark.parametrize("path", ["/health", "/v1/stats"])
def test_a_malformed_origin_is_400_on_every_route(open_url, origin, path):
    response = httpx.get(f"{open_url}{path}", headers={"Origin": origin})
    assert response.status_code == 400 and response.json()["error"] == "BadRequest"


@pytest.mark.parametrize("depth", [100, 478, 700, 950, 979, 5000])
@pytest.mark.parametrize("shape", ["array", "object"])
def test_nesting_is_bounded_before_any_recursion(open_url, depth, shape):
    inner = "[" * depth + "]" * depth if shape == "array" else '{"a":' * depth + "1" + "}" * depth
    for body in (f'{{"trajectories": [{inner}]}}', f'{{"goal": "g", "observation": {inner}}}'):
        for route in ("/v1/learn", "/v1/recall"):
            response = httpx.post(f"{open_url}{route}", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 400, (route, response.text[:200])
            assert "nested deeper" in response.json()["message"]


def test_a_nul_escape_inside_a_string_is_refused(open_url):
    response = httpx.post(f"{open_url}/v1/recall", content='{"goal": "a\\u0000b", "observation": {"app": "x"}}',
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "NUL" in response.json()["message"]


def test_the_openapi_document_declares_request_strings_nul_free_and_replies_unchanged(open_url):
    doc = httpx.get(f"{open_url}/openapi.json").json()
    body = doc["paths"]["/v1/recall"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("RecallRequestRequest")
    schemas = doc["components"]["schemas"]
    assert schemas["RecallRequestRequest"]["properties"]["goal"]["pattern"] == "^[^\\u0000]*$"
    assert schemas["ObservationRequest"]["properties"]["app"]["pattern"] == "^[^\\u0000]*$"
    assert "pattern" not in schemas["Observation"]["properties"]["app"]
