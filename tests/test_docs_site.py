"""The docs are a site a newcomer can browse, and the README is the short way in.

`mkdocs build --strict` (what bin/test runs before pytest) fails on a broken link between pages or a page the
nav names that does not exist; the README's own links are checked here, since MkDocs never reads it. The
README's curl example is the one that works against `bin/run` as started, whatever `WL_PORT` says.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_docs_site_builds_strictly_with_every_page_and_the_screenshots_at_1440_and_390(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    for page in ("api", "alertmanager", "alerting", "reviews", "notifications", "exports", "operations",
                 "benchmarks", "fault-corpus"):
        assert (site / page / "index.html").is_file(), page
    console = (site / "console" / "index.html").read_text()
    for shot in ("run-1440.png", "run-390.png", "inbox-1440.png", "inbox-390.png"):
        assert f'src="../screenshots/{shot}"' in console
        assert (site / "screenshots" / shot).stat().st_size > 0


def test_a_broken_link_in_the_docs_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the API](api.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text())
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "api.md" in done.stdout + done.stderr


def test_every_relative_link_in_the_readme_resolves_to_a_file_in_the_repository():
    targets = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    relative = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert relative, "the README links into the docs"
    missing = [t for t in relative if not (ROOT / t.split("#")[0]).is_file()]
    assert not missing


def test_the_readme_is_the_short_way_in_and_links_to_each_topic_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 120
    assert [h for h in re.findall(r"^## (.+)$", text, re.M)] == [
        "Run it", "Test it", "Send a first point", "Watch it run", "Where to read on"]
    for page in ("api", "alertmanager", "alerting", "reviews", "notifications", "exports", "operations",
                 "benchmarks", "fault-corpus"):
        assert f"](docs/{page}.md)" in text


def test_the_readmes_curl_example_follows_wl_port_as_bin_run_does():
    default = re.search(r"^PORT=\$\{WL_PORT:-(\d+)\}$", (ROOT / "bin" / "run").read_text(), re.M).group(1)
    text = README.read_text()
    assert f"curl -X POST http://127.0.0.1:${{WL_PORT:-{default}}}/api/v1/ingest" in text
    assert not re.search(r"curl[^\n]*127\.0\.0\.1:\d", text)
