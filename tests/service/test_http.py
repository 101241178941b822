from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.conftest import KEY
from tests.service.test_core import request

H = {"Authorization": f"Bearer {KEY}"}
J = {**H, "Content-Type": "application/json"}


def test_health_and_the_page_shell_are_open_and_every_api_route_needs_the_key(http):
    assert httpx.get(f"{http}/health").status_code == 200
    assert httpx.get(f"{http}/").status_code == 200
    for path in ("/v1/stats", "/v1/items", "/v1/graph", "/v1/runs"):
        r = httpx.get(f"{http}{path}")
        assert r.status_code == 401 and r.json()["error"] == "Unauthorized"
    assert httpx.get(f"{http}/v1/stats", headers={"X-API-Key": "wrong"}).status_code == 401
    assert httpx.get(f"{http}/v1/stats", headers={"X-API-Key": KEY}).status_code == 200
    assert httpx.get(f"{http}/v1/stats", headers=H).status_code == 200


def test_learn_recall_curate_and_inspect_over_http(http, trajectories_json):
    r = httpx.post(f"{http}/v1/learn", json={"trajectories": trajectories_json, "end_round": True}, headers=H)
    assert r.status_code == 200 and r.json()["episodes"] == 2
    stats = httpx.get(f"{http}/v1/stats", headers=H).json()
    assert stats["items"] == {"knowledge:candidate": 2}
    rec = httpx.post(f"{http}/v1/recall", content=request().model_dump_json(), headers=J)
    assert rec.status_code == 200 and rec.json()["method"] == "steer"
    items = httpx.get(f"{http}/v1/items", params={"status": "candidate"}, headers=H).json()
    one = items[0]["id"]
    assert httpx.get(f"{http}/v1/items/{one}", headers=H).json()["id"] == one
    assert [e["type"] for e in httpx.get(f"{http}/v1/items/{one}/history", headers=H).json()] == ["created"]
    bad = httpx.post(f"{http}/v1/items/{one}/admit", json={"reason": "looks right"}, headers=H)
    assert bad.status_code == 409 and bad.json()["error"] == "LifecycleError"
    missing = httpx.get(f"{http}/v1/items/nope", headers=H)
    assert missing.status_code == 404 and missing.json()["error"] == "NotFoundError"


def test_oversized_and_malformed_payloads_are_refused_and_store_nothing(http, trajectories_json):
    big = {"trajectories": trajectories_json * 100}
    r = httpx.post(f"{http}/v1/learn", json=big, headers=H)
    assert r.status_code == 413
    r = httpx.post(f"{http}/v1/learn", content=b"{not json", headers={**H, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "BadRequest"
    broken = json.loads(json.dumps(trajectories_json))
    broken[1]["steps"][0]["action"]["kind"] = "teleport"
    r = httpx.post(f"{http}/v1/learn", json={"trajectories": broken}, headers=H)
    assert r.status_code == 422
    assert httpx.get(f"{http}/v1/stats", headers=H).json()["events"] == 0


def test_chunked_bodies_are_size_limited_too(http):
    def small():
        body = request().model_dump_json().encode()
        yield body[:100]
        yield body[100:]

    def big():
        for _ in range(300):
            yield b"x" * 1000

    assert httpx.post(f"{http}/v1/recall", content=small(), headers=J).status_code == 200
    r = httpx.post(f"{http}/v1/learn", content=big(), headers=J)
    assert r.status_code == 413 and "over 200000 bytes" in r.json()["message"]


def test_export_and_import_stay_inside_the_data_directory(http, data_dir, trajectories_json):
    httpx.post(f"{http}/v1/learn", json={"trajectories": trajectories_json, "end_round": True}, headers=H)
    outside = httpx.post(f"{http}/v1/export", json={"path": "/tmp/escape.jsonl"}, headers=H)
    assert outside.status_code == 422 and outside.json()["error"] == "ValidationError"
    sneaky = httpx.post(f"{http}/v1/import", json={"path": "../x.jsonl"}, headers=H)
    assert sneaky.status_code == 422
    ok = httpx.post(f"{http}/v1/export", json={"path": "m.jsonl"}, headers=H)
    assert ok.status_code == 200 and ok.json()["records"] == 2 and ok.json()["path"] == "exports/m.jsonl"
    assert (data_dir / "exports" / "m.jsonl").is_file()


def test_concurrent_requests_are_safe(http, trajectories_json):
    def work(i):
        if i % 4 == 0:
            return httpx.post(f"{http}/v1/learn", json={"trajectories": trajectories_json[:1]}, headers=H,
                              timeout=30).status_code
        return httpx.post(f"{http}/v1/recall", content=request(seed=i).model_dump_json(), headers=J,
                          timeout=30).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(work, range(40)))
    assert codes == [200] * 40
    events = [e for e in httpx.get(f"{http}/v1/stats", headers=H).json().items()]
    assert events


finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers() | finite | st.text(max_size=20)
json_values = st.recursive(scalars,
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
                           max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(["/v1/recall", "/v1/learn", "/v1/export", "/v1/import", "/v1/items/x/admit",
                              "/v1/end_round"]),
       body=json_values)
def test_fuzzed_bodies_never_cause_a_server_error(http, route, body):
    r = httpx.post(f"{http}{route}", json=body, headers=H, timeout=30)
    assert r.status_code < 500, r.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#%"), min_size=1,
                    max_size=30))
def test_fuzzed_item_ids_never_cause_a_server_error(http, path):
    from urllib.parse import quote

    for suffix in ("", "/history"):
        r = httpx.get(f"{http}/v1/items/{quote(path, safe='')}{suffix}", headers=H, timeout=30)
        assert r.status_code < 500, r.text


def test_an_item_id_with_a_nul_byte_is_a_client_error(http):
    for suffix in ("", "/history"):
        r = httpx.get(f"{http}/v1/items/%00{suffix}", headers=H)
        assert 400 <= r.status_code < 500, r.text


def test_openapi_schema_lists_the_routes(http):
    schema = httpx.get(f"{http}/openapi.json", headers=H).json()
    assert {"/v1/recall", "/v1/learn", "/v1/end_round", "/v1/items/{item_id}/history"} <= set(schema["paths"])


def test_a_mistyped_kind_or_status_filter_is_a_client_error_naming_the_near_miss(http):
    r = httpx.get(f"{http}/v1/items", params={"kind": "knowlege"}, headers=H, timeout=30)
    assert r.status_code == 422 and "knowledge" in r.text, r.text
    r = httpx.get(f"{http}/v1/items", params={"status": "admited"}, headers=H, timeout=30)
    assert r.status_code == 422 and "admitted" in r.text, r.text
    params = httpx.get(f"{http}/openapi.json", headers=H).json()["paths"]["/v1/items"]["get"]["parameters"]
    assert all("enum" in str(p["schema"]) or "$ref" in str(p["schema"]) for p in params), params
    assert httpx.get(f"{http}/v1/items", params={"kind": "warning", "status": "trial"}, headers=H,
                     timeout=30).status_code == 200
