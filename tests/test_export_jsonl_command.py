"""`manage.py export_jsonl` writes what the API's export answers, line for line."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.export_support import body_of, strict_lines
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("args, path", [
    (["--project", "pretrain"], "/api/v1/projects/pretrain/export/"),
    (["--run", "exp/b"], "/api/v1/runs/exp/b/export/"),
    (["--run", "exp-a", "--types", "events,alerts"], "/api/v1/runs/exp-a/export/?types=events,alerts"),
    (["--project", "pretrain", "--since", "2025-11-24T16:00:00Z"], "/api/v1/projects/pretrain/export/?since=2025-11-24T16:00:00Z"),
])
def test_the_file_is_the_apis_answer(exported, owner, tmp_path, args, path):
    out = tmp_path / "export.jsonl"
    call_command("export_jsonl", *args, "--output", str(out))
    written = out.read_bytes()
    assert written == body_of(client_for(owner).get(path))
    assert strict_lines(written)


def test_without_output_it_writes_to_standard_output(exported, owner):
    out = StringIO()
    call_command("export_jsonl", "--run", "exp-a", stdout=out)
    assert out.getvalue().encode() == body_of(client_for(owner).get("/api/v1/runs/exp-a/export/"))


@pytest.mark.parametrize("args, words", [
    (["--run", "no-such-run"], "no such run: no-such-run"),
    (["--project", "nope"], "no such project: nope"),
    (["--project", "pretrain", "--types", "alerts,metrics"], "--types: unknown type 'metrics'"),
    (["--project", "pretrain", "--since", "last week"], "--since: not an ISO 8601 date-time"),
])
def test_a_bad_argument_is_an_error_naming_it(exported, tmp_path, args, words):
    out = tmp_path / "export.jsonl"
    with pytest.raises(CommandError, match=words):
        call_command("export_jsonl", *args, "--output", str(out))
    assert not out.exists()
