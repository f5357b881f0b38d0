"""Memory and time of one hostile request, through the whole Django stack (middleware, auth, parsing, validation, the answer).

    .venv/bin/python benchmarks/hostile_input.py [--case NAME]

Each case runs in a fresh process (so its peak is its own) against a throwaway
embedded console: the peak resident memory the request added (ru_maxrss after
minus before, with the 4 MiB body already built), the wall time, and the status
and size of the answer. The red team's 4 MiB of `1\\n` NDJSON lines once gave a
202 MB error body and a 1.1 GB worker.
"""
import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def _fill(head: bytes, item: bytes, tail: bytes, size=4 * MIB) -> bytes:
    count = (size - len(head) - len(tail)) // len(item)
    return head + item * count + tail


CASES = {
    # name: (path, content type, extra headers, body builder)
    "ndjson-2M-bad-lines": ("/api/v1/ingest", "application/x-ndjson", {}, lambda: b"1\n" * (2 * MIB)),
    "ndjson-2M-malformed": ("/api/v1/ingest", "application/x-ndjson", {}, lambda: b"x\n" * (2 * MIB)),
    "ndjson-nan-malformed": ("/api/v1/ingest", "application/x-ndjson", {}, lambda: _fill(b"", b'{"a": NaN\n', b"")),
    "ndjson-20001-bad-lines": ("/api/v1/ingest", "application/x-ndjson", {}, lambda: b'{"a": NaN\n' * 20_001),
    "ndjson-over-item-limit": ("/api/v1/ingest", "application/x-ndjson", {}, lambda: _fill(
        b"", b'{"type":"point","run":"r","step":1,"metric":"m","value":1}\n', b"")),
    "json-unknown-fields": ("/api/v1/ingest", "application/json", {}, lambda: b'{"run":{"id":"r"}'
        + b"".join(b',"f%07d":1' % i for i in range((4 * MIB - 40) // 13)) + b"}"),
    "json-empty-points": ("/api/v1/ingest", "application/json", {}, lambda: _fill(b'{"run":{"id":"r"},"points":[{}', b",{}", b"]}")),
    "json-empty-phases": ("/api/v1/ingest", "application/json", {}, lambda: _fill(b'{"run":{"id":"r"},"phases":[{}', b",{}", b"]}")),
    "json-deep-config": ("/api/v1/ingest", "application/json", {}, lambda: _fill(b'{"run":{"id":"r","config":', b'{"a":', b"1")),
    "json-many-tags": ("/api/v1/ingest", "application/json", {}, lambda: b'{"run":{"id":"r","tags":{'
        + b",".join(b'"t%07d":""' % i for i in range((4 * MIB - 40) // 14)) + b"}}}"),
    "gzip-bomb-64MiB": ("/api/v1/ingest", "application/json", {"HTTP_CONTENT_ENCODING": "gzip"},
                        lambda: gzip.compress(b" " * (64 * MIB), compresslevel=9)),
    "api-body-nul-strings": ("/api/v1/rules/", "application/json", {}, lambda: b"{" + b",".join(
        b'"k%07d":"\\u0000"' % i for i in range(4 * MIB // 20)) + b"}"),
}


def run_case(name):
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    django.setup()
    from django.test import Client

    from ingest.models import Project, ProjectToken

    token = ProjectToken.issue(Project.objects.get(slug="bench"))[1]
    path, content_type, headers, build = CASES[name]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", raise_request_exception=False)
    client.post("/api/v1/ingest", b'{"run": {"id": "warm-up"}}', content_type="application/json")  # imports, first query
    body = build()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    response = client.generic("POST", path, body, content_type=content_type, **headers)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "case": name, "body_bytes": len(body), "status": response.status_code, "answer_bytes": len(response.content),
        "peak_rss_added_mib": round((after - before) / 1024, 1), "seconds": round(seconds, 2),
    }))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        return run_case(args.case)
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "WL_VAR_DIR": var, "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "LOG_LEVEL": "ERROR"}
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
        subprocess.run([*manage, "issue_token", "bench", "--owner", "Bench <bench@example.com>"], env=env, check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        print(f"{'case':<24} {'body':>9} {'status':>6} {'answer':>8} {'peak RSS added':>15} {'seconds':>8}")
        for name in CASES:
            out = subprocess.run([sys.executable, __file__, "--case", name], env=env, cwd=ROOT, capture_output=True, text=True)
            if out.returncode:
                print(f"{name:<24} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{name:<24} {row['body_bytes']:>9} {row['status']:>6} {row['answer_bytes']:>8} "
                  f"{row['peak_rss_added_mib']:>11} MiB {row['seconds']:>8}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
