"""Every round a reply or file carries says its base in its name: ``*_index`` from 0, counts in plural; old
replies and exports (format version 1) still read."""

from __future__ import annotations

import json

from guimem.service.http import create_app
from guimem.service.models import Stats
from guimem.service.views import runs_view
from tests.service.test_core import service, trajectories


def test_stats_names_the_last_committed_round_an_index_and_the_boundaries_a_count(tmp_path):
    svc = service(tmp_path)
    svc.learn_file(trajectories(tmp_path))
    reply = svc.end_round().model_dump(mode="json")
    assert reply["version"] == 2
    assert reply["committed_round_index"] == 0 and reply["boundaries_applied"] == 1
    assert not {"round", "committed_round"} & set(reply), reply


def test_a_version_1_stats_reply_still_reads():
    old = {"method": "steer", "namespace": "steer", "items": {}, "events": 3, "round": 2, "committed_round": 1}
    stats = Stats.model_validate(old)
    assert (stats.version, stats.boundaries_applied, stats.committed_round_index) == (2, 2, 1)
    assert Stats.model_validate_json(stats.model_dump_json()) == stats


def test_runs_lists_each_methods_round_indexes(tmp_path):
    for r in (0, 1):
        (tmp_path / "traces" / "steer").mkdir(parents=True, exist_ok=True)
        (tmp_path / "traces" / "steer" / f"round-{r}.jsonl").write_text("")
    assert [run.model_dump() for run in runs_view(tmp_path)] == [{"method": "steer", "round_indexes": [0, 1]}]


def test_the_openapi_document_says_the_base_of_every_round_field(tmp_path):
    svc = service(tmp_path)
    doc = create_app(svc, api_key="k").openapi()
    schemas = doc["components"]["schemas"]
    assert {"committed_round_index", "boundaries_applied", "version"} <= set(schemas["Stats"]["properties"])
    assert not {"round", "committed_round"} & set(schemas["Stats"]["properties"])
    runs = doc["paths"]["/v1/runs"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert runs["items"]["$ref"].endswith("/RunTraces"), runs
    assert set(schemas["RunTraces"]["properties"]) == {"method", "round_indexes"}
    svc.close()


def test_an_export_header_counts_boundaries_by_name_and_a_version_1_export_still_imports(tmp_path):
    svc = service(tmp_path)
    svc.learn_file(trajectories(tmp_path))
    svc.end_round()
    svc.export(tmp_path / "export.jsonl")
    lines = (tmp_path / "export.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["boundaries_applied"] == 1 and "round" not in header
    old = {**{k: v for k, v in header.items() if k != "boundaries_applied"}, "version": 1, "round": 4}
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(old), *lines[1:]]) + "\n")
    other = service(tmp_path, store="other.sqlite")
    back = other.import_(tmp_path / "old.jsonl")
    assert back.records == 2 + 2 and other.stats().boundaries_applied == 4  # + an untrusted version per item
    svc.close()
    other.close()

