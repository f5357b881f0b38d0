import gzip
import hashlib
from collections import OrderedDict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ingest.auth import token_from_header
from ingest.contract import MAX_BODY_BYTES, MAX_ITEMS, MAX_PHASES, ContractError, loads, parse_ndjson
from ingest.service import RunOfAnotherProject, ingest_batch


def split_requests(lines, max_items=MAX_ITEMS, max_bytes=MAX_BODY_BYTES, max_phases=MAX_PHASES):
    """Group NDJSON lines into per-run requests within the contract's limits.

    Yields (run_id, [(file line number, raw line)]); every request of a run
    starts with that run's `run` line, so each one stands on its own.
    """
    per_run = OrderedDict()
    run_lines = {}
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            obj = loads(raw)
        except ContractError:
            obj = None
        if type(obj) is not dict:
            yield None, [(number, raw)]  # let the validator report it with its line number
            continue
        if obj.get("type") == "run":
            run_id = obj.get("id")
            run_lines[run_id] = (number, raw)
        else:
            run_id = obj.get("run")
        per_run.setdefault(run_id, []).append((number, raw, obj.get("type") in ("point", "event"), obj.get("type") == "phase"))
    for run_id, items in per_run.items():
        head = run_lines.get(run_id)
        chunk, count, phases, size = [], 0, 0, 0
        for number, raw, counts, phase in items:
            if (number, raw) == head:
                continue
            if chunk and (count + counts > max_items or phases + phase > max_phases
                          or size + len(raw) + 1 > max_bytes - (len(head[1]) + 1 if head else 0)):
                yield run_id, ([head] if head else []) + chunk
                chunk, count, phases, size = [], 0, 0, 0
            chunk.append((number, raw))
            count += counts
            phases += phase
            size += len(raw) + 1
        if chunk or head:
            yield run_id, ([head] if head else []) + chunk


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


class Command(BaseCommand):
    help = "Load an NDJSON file (a spooled or exported run, .gz allowed) through the ingest path, in contract-sized requests."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--token", required=True, help="the project's ingest token")

    def handle(self, file: Path, token: str, **options):
        if not file.exists():
            raise CommandError(f"{file}: no such file")
        try:
            project = token_from_header(f"Bearer {token}").project
        except Exception as exc:
            raise CommandError(f"--token: {exc}") from None
        digest = hashlib.sha256()
        with _open(file) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        file_key = digest.hexdigest()[:16]
        totals = {"points": 0, "events": 0, "phases": 0, "requests": 0, "duplicates": 0}
        # Validate the whole file before storing any of it: a bad line anywhere stores nothing.
        batches = []
        with _open(file) as fh:
            numbered = ((number, line.rstrip(b"\r\n")) for number, line in enumerate(fh, start=1))
            for index, (_, chunk) in enumerate(split_requests(numbered)):
                body = b"\n".join(raw for _, raw in chunk)
                try:
                    # Deterministic batch ids: importing the same file twice stores it once.
                    batches.append(parse_ndjson(body, batch_id=f"import:{file_key}:{index}"))
                except ContractError as exc:
                    raise CommandError(_file_errors(exc, chunk)) from None
        for batch in batches:
            try:
                result = ingest_batch(project, batch)
            except RunOfAnotherProject:
                raise CommandError(f"run {batch.run_id!r} belongs to another project; this token may not write to it") from None
            totals["requests"] += 1
            totals["duplicates"] += result.duplicate
            for key in ("points", "events", "phases"):
                totals[key] += getattr(result, key)
        self.stdout.write(
            f"imported {file.name}: {totals['points']} points, {totals['events']} events, {totals['phases']} phases "
            f"in {totals['requests']} requests ({totals['duplicates']} already stored)"
        )


def _file_errors(exc: ContractError, chunk) -> str:
    """Rewrite the request's line numbers (lines[k]) into the file's."""
    out = []
    for error in exc.errors[:50]:
        path, message = error["path"], error["message"]
        if path.startswith("lines["):
            k = int(path[6 : path.index("]")])
            number = chunk[k - 1][0]
            path = f"line {number}{path[path.index(']') + 1:]}"
            message = message.split(": ", 1)[-1] if message.startswith("line ") else message
        out.append(f"{path}: {message}")
    more = exc.total - min(len(exc.errors), 50)
    return "invalid file:\n  " + "\n  ".join(out) + (f"\n  … and {more} more" if more > 0 else "")
