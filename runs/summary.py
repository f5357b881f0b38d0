"""The runs list: each run's status, last step, open alerts and its five layers at a glance, with filters."""
import json
from collections import defaultdict

from django.core.paginator import Paginator
from django.db.models.fields.json import KeyTransform

from alerts.health import filter_by_health, health, runs_with_open_trouble
from alerts.models import Alert, AlertState
from alerts.review import runs_needing_review
from ingest.models import Layer, RunStatus, Series
from opsconsole.permissions import visible_projects, visible_runs
from runs.search import search_runs

LAYERS = [Layer.SYSTEM, Layer.DATA, Layer.NUMERICS, Layer.OPTIMIZATION, Layer.GENERALIZATION]
PAGE_SIZE = 50  # runs a page: the page's cost is this many rows, however many runs the console holds


def parse_tag(text: str):
    """'team=pretrain' -> ('team', 'pretrain'); a bare key matches any value."""
    key, _, value = text.partition("=")
    return key.strip(), (value.strip() if _ else None)


def runs_list(user, project=None, status=None, tag=None, q=None, page=None) -> dict:
    runs = search_runs(visible_runs(user).order_by("-last_seen_at", "run_id"), q)
    if project:
        runs = runs.filter(project__slug=project)
    if status in RunStatus.values:
        runs = filter_by_health(runs, status)
    if tag:
        key, value = parse_tag(tag)
        # The key is data, never part of a lookup: "a__regex" is a tag named that, not a regex.
        runs = runs.filter(tags__has_key=key)
        if value is not None:
            runs = runs.annotate(tag_value=KeyTransform(key, "tags")).filter(tag_value=value)
    page = Paginator(runs, PAGE_SIZE).get_page(page)
    runs = list(page.object_list)
    ids = [r.pk for r in runs]
    layers_with_data = defaultdict(set)
    layer_of = {}
    for run_id, metric, component, layer in Series.objects.filter(run_id__in=ids).values_list("run_id", "metric", "component", "layer"):
        layers_with_data[run_id].add(layer)
        layer_of[(run_id, metric, component)] = layer
    open_alerts = defaultdict(list)
    for alert in Alert.objects.filter(run_id__in=ids).exclude(state=AlertState.RESOLVED).values("run_id", "metric", "component", "state"):
        open_alerts[alert["run_id"]].append(alert)
    # A hard invariant that cleared with nobody looking (alerts/review.py): the run is not healthy until someone has.
    review = runs_needing_review(ids)
    troubled_runs = runs_with_open_trouble(ids)
    rows = []
    for run in runs:
        troubled = defaultdict(int)
        for alert in open_alerts[run.pk]:
            # Event alerts name no metric: they belong to the numerics layer, as job health events do.
            troubled[layer_of.get((run.pk, alert["metric"], alert["component"]), Layer.NUMERICS)] += 1
        glance = []
        for layer in LAYERS:
            state = "alert" if troubled[layer] else ("ok" if layer in layers_with_data[run.pk] else "none")
            glance.append({"layer": layer, "state": state, "alerts": troubled[layer]})
        rows.append({"run": run, "open_alerts": len(open_alerts[run.pk]), "layers": glance, "needs_review": run.pk in review,
                     "health": health(run.status, open_trouble=run.pk in troubled_runs, needs_review=run.pk in review)})
    projects = visible_projects(user).order_by("slug")
    return {
        "rows": rows,
        "projects": projects,
        "live_projects": json.dumps([p.slug for p in projects]),
        "statuses": RunStatus.choices,
        "filters": {"project": project or "", "status": status or "", "tag": tag or "", "q": (q or "").strip()},
        "page": page,
    }
