"""`manage.py import_jsonl FILE --token T` loads a spooled or exported NDJSON file through the ingest path."""
import gzip
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from ingest.models import BatchReceipt, Run
from tests.conftest import stored_counts

pytestmark = pytest.mark.django_db
REAL_RUNS = Path(__file__).resolve().parent.parent / "data" / "real-runs"


def test_real_run_larger_than_one_request_is_split_and_read_back_value_for_value(token, sender):
    path = REAL_RUNS / "llmc-gpt2-124m-2024-10-13.ndjson.gz"
    call_command("import_jsonl", str(path), token=token)
    sent = {}
    with gzip.open(path, "rt") as fh:
        import json

        for line in fh:
            item = json.loads(line)
            if item["type"] == "point":
                sent.setdefault(item["metric"], {})[item["step"]] = item["value"]
    assert BatchReceipt.objects.count() >= 6  # 58,760 points cannot go in one request
    for metric, values in sent.items():
        got = sender.get("/api/v1/runs/llmc-gpt2-124m-2024-10-13/points/", metric=metric).json()["points"]
        assert {p["step"]: p["value"] for p in got} == values


def test_importing_the_same_file_twice_stores_it_once(token, tmp_path):
    path = tmp_path / "spool.ndjson"
    path.write_text(
        '{"type":"run","id":"spooled"}\n'
        + "".join(f'{{"type":"point","run":"spooled","step":{s},"metric":"loss","value":{s}}}\n' for s in range(25))
    )
    call_command("import_jsonl", str(path), token=token)
    before = stored_counts()
    call_command("import_jsonl", str(path), token=token)
    assert stored_counts() == before
    assert Run.objects.get(run_id="spooled").attempt == 1


def test_a_bad_line_anywhere_stores_nothing_and_names_the_file_line(token, tmp_path):
    lines = ['{"type":"run","id":"badfile"}']
    lines += [f'{{"type":"point","run":"badfile","step":{s},"metric":"loss","value":1}}' for s in range(12000)]
    lines[11000] = '{"type":"point","run":"badfile","step":10999,"metric":"loss","value":"nan"}'
    path = tmp_path / "bad.ndjson"
    path.write_text("\n".join(lines) + "\n")
    before = stored_counts()
    with pytest.raises(CommandError, match=r"line 11001\.value"):
        call_command("import_jsonl", str(path), token=token)
    assert stored_counts() == before


def test_wrong_token_is_refused(tmp_path, db):
    path = tmp_path / "x.ndjson"
    path.write_text('{"type":"run","id":"x"}\n')
    with pytest.raises(CommandError, match="--token"):
        call_command("import_jsonl", str(path), token="wl_wrong")


def test_a_file_with_more_phases_than_one_request_holds_is_split_too(token, tmp_path, sender):
    # A phase on every step: 10,001 phases are more than one request may carry (413), so they are split.
    lines = ['{"type":"run","id":"phased"}']
    for s in range(10_001):
        lines.append(f'{{"type":"phase","run":"phased","step":{s},"phase":"{"eval" if s % 2 else "steady"}"}}')
    path = tmp_path / "phased.ndjson"
    path.write_text("\n".join(lines) + "\n")
    call_command("import_jsonl", str(path), token=token)
    assert BatchReceipt.objects.filter(run__run_id="phased").count() == 2
    assert len(sender.get("/api/v1/runs/phased/").json()["phases"]) == 10_001
