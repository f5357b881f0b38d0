"""The layout docs/architecture.md promises: a newcomer finds any page or endpoint by its app."""
import ast
from pathlib import Path

from django.urls import get_resolver

ROOT = Path(__file__).resolve().parent.parent
APPS = ("opsconsole", "ingest", "alerts", "runs", "reviews", "audit", "notifications", "exports", "retention")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_ingest_imports_nothing_from_the_apps_that_build_on_it():
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] in ("alerts", "runs", "reviews", "audit", "notifications", "exports"))
        for path in (ROOT / "ingest").rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_alerts_import_nothing_from_reviews():
    """Reviews build on alerts (they subscribe to alerts/signals.py); alerts never reach back."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "reviews")
        for path in (ROOT / "alerts").rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_alerts_import_nothing_from_audit():
    """The audit reads alerts' rows (and reuses alerts/fatigue.py); alerts never reach back."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "audit")
        for path in (ROOT / "alerts").rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_alerts_import_nothing_from_notifications():
    """Notifications subscribe to alerts/signals.py (incident_changed); alerts never reach back."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "notifications")
        for path in (ROOT / "alerts").rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_nothing_but_the_console_imports_exports():
    """Exports read every app's rows; no app reaches back (only opsconsole mounts its routes and settings)."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "exports")
        for app in APPS if app not in ("exports", "opsconsole") for path in (ROOT / app).rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_no_module_is_named_after_views():
    named = [str(p.relative_to(ROOT)) for app in APPS for p in (ROOT / app).rglob("*.py")
             if p.name.endswith("views.py")]
    assert named == []


def test_every_route_is_served_by_its_apps_api_or_pages_module():
    """API routes by `<app>.api`, page routes by `<app>.pages` (Django's admin and auth views aside)."""
    misplaced = []

    def walk(patterns, prefix=""):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if hasattr(pattern, "url_patterns"):
                if route.startswith("admin/"):
                    continue
                walk(pattern.url_patterns, route)
                continue
            callback = pattern.callback
            module = getattr(callback, "__module__", "")
            view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
            if view_class is not None:
                module = view_class.__module__
            wrapped = getattr(callback, "__wrapped__", None)
            if wrapped is not None and module.startswith("django."):
                module = getattr(wrapped, "__module__", module)
            if module.startswith(("django.", "drf_spectacular.")):
                continue
            expected = ".api" if route.startswith("api/v1/") else ".pages"
            if module.split(".")[0] not in APPS or not module.endswith(expected):
                misplaced.append((route, module))

    walk(get_resolver().url_patterns)
    assert misplaced == []


def test_each_apps_templates_live_under_its_own_folder():
    templates = ROOT / "templates"
    folders = {p.name for p in templates.iterdir() if p.is_dir()}
    # registration/ is where Django's auth views look for the login page; the rest is one folder per app.
    assert folders <= {"registration", *APPS}, folders
    for app in ("alerts", "runs", "reviews", "audit", "notifications"):
        names = {p.name for p in (templates / app).glob("*.html")}
        assert names, app


def test_the_image_installs_every_packaged_app():
    """The Dockerfile copies each app before `pip install .`, so the installed package holds them all."""
    import tomllib

    packaged = {p.rstrip("*") for p in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]}
    dockerfile = (ROOT / "Dockerfile").read_text()
    before_install = dockerfile[: dockerfile.index("RUN pip install")]
    assert {app for app in packaged if f"COPY {app} ./{app}" not in before_install} == set()


def project_modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan): each is a circle of imports."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in graph:
        if module not in index:
            visit(module)
    return circles


def test_no_module_imports_one_that_imports_it_back():
    # Imports inside functions count too: a deferred import hides a circle from Python, not from a reader.
    modules = project_modules()
    graph = {name: {m for m in imported_modules(path) if m in modules and m != name} for name, path in modules.items()}
    assert import_circles(graph) == []


def test_the_circle_finder_finds_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_no_tracked_file_holds_a_merge_conflict_marker():
    """A conflict resolved by `git add` with its markers left in reads as garbage in the docs site and may still
    parse (a Markdown page, a template); this is the one place that catches it."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.split(b"\0")
    marked = []
    for name in filter(None, tracked):
        path = root / name.decode()
        if not path.is_file() or path.suffix not in {".py", ".md", ".html", ".js", ".css", ".yml", ".yaml", ".toml", ".txt", ""}:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======":
                marked.append(f"{name.decode()}:{number}")
    assert marked == []
