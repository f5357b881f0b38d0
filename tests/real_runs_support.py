"""The real public training runs in data/real-runs/: importing one as a job would send it, and its labels."""
import json
from pathlib import Path

from django.core.management import call_command

REAL_RUNS = Path(__file__).resolve().parent.parent / "data" / "real-runs"


def import_real(token, django_capture_on_commit_callbacks, name):
    """Load data/real-runs/<name>.ndjson.gz through `import_jsonl` (the ingest path), evaluation included."""
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_jsonl", str(REAL_RUNS / f"{name}.ndjson.gz"), token=token)


def labels(name):
    return json.loads((REAL_RUNS / "labels.json").read_text())["runs"][name]
