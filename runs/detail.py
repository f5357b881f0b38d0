"""What the run page shows, gathered in one place (the view stays a few lines)."""
from collections import defaultdict
from datetime import datetime, timezone
from urllib.parse import urlencode

from django.urls import reverse

from alerts.chart import chart_data, headline_metric, rule_links
from alerts.health import health_of
from alerts.incidents import describe_origin
from alerts.models import Alert, AlertState, IncidentState, Rule
from alerts.review import needs_review, unreviewed
from ingest.models import Layer, Series
from opsconsole.words import identity_words
from reviews.chronicle import attempts as chronicle_attempts
from reviews.models import ReviewSchedule

LAYER_ORDER = [Layer.OPTIMIZATION, Layer.NUMERICS, Layer.GENERALIZATION, Layer.DATA, Layer.SYSTEM]
LAYER_HINT = {
    Layer.SYSTEM: "throughput, step time, hardware",
    Layer.DATA: "data loading and batches",
    Layer.NUMERICS: "gradients, weights, activations per component",
    Layer.OPTIMIZATION: "loss, learning rate, updates",
    Layer.GENERALIZATION: "validation and evaluation",
}


def _quantity(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def budget_words(budget) -> str:
    """{"steps": 19560, "gpu_hours": 12.5, "deadline": …} as '19,560 steps · 12.5 GPU hours · deadline 2026-12-01 12:00:00 UTC'."""
    if not isinstance(budget, dict) or not budget:
        return "—"
    parts = []
    if budget.get("steps") is not None:
        parts.append(f"{_quantity(budget['steps'])} steps")
    if budget.get("gpu_hours") is not None:
        parts.append(f"{_quantity(budget['gpu_hours'])} GPU hours")
    if budget.get("deadline"):
        try:
            when = datetime.fromisoformat(budget["deadline"]).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        except (TypeError, ValueError):
            when = str(budget["deadline"])
        parts.append(f"deadline {when}")
    parts += [f"{key} {identity_text(value)}" for key, value in budget.items() if key not in ("steps", "gpu_hours", "deadline")]
    return " · ".join(parts)


def identity_text(value, field=None) -> str:
    """An identity value as text: a budget in words, anything structured as "key value" words."""
    if field == "budget":
        return budget_words(value)
    return identity_words(value)


def first_trouble(alerts):
    """Per component, the first step at which any alert of it began: the first to go wrong sorts first."""
    first = {}
    for alert in alerts:
        if alert.component not in first or alert.first_step < first[alert.component]:
            first[alert.component] = alert.first_step
    return first


def incidents_to_look_at(run, alerts, needing) -> list[dict]:
    """The run's incidents still open, or with an alert that ended with nobody's word on it: what the page leads with."""
    unlooked = {a.incident_id for a in needing}
    by_incident = defaultdict(list)
    for alert in alerts:
        by_incident[alert.incident_id].append(alert)
    out = []
    for incident in run.incidents.select_related("origin__rule", "run__project").order_by("first_step", "id"):
        if incident.state == IncidentState.RESOLVED and incident.pk not in unlooked:
            continue
        members = by_incident.get(incident.pk, [])
        out.append({
            "incident": incident, "origin": describe_origin(incident.origin) if incident.origin else "—",
            "alerts": len(members), "unlooked": incident.pk in unlooked,
            # Where the channels' messages send people (notifications/routing.py's incident_url), as a path.
            "link": reverse("console:inbox") + "?" + urlencode({"state": "all", "project": run.project.slug}) + f"#incident-{incident.pk}",
            "reviews": sorted({rv for a in members for rv in a.reviews.all()}, key=lambda rv: rv.pk),
        })
    return out


def run_page(run) -> dict:
    alerts = list(Alert.objects.filter(run=run).select_related("rule", "run").prefetch_related("reviews").order_by("first_step", "id"))
    trouble = first_trouble(alerts)
    never = float("inf")
    series = list(Series.objects.filter(run=run).order_by("metric", "component"))
    layers = []
    for layer in LAYER_ORDER:
        in_layer = [s for s in series if s.layer == layer]
        if not in_layer:
            continue
        run_level = [s for s in in_layer if not s.component]
        by_metric = defaultdict(list)
        for s in in_layer:
            if s.component:
                by_metric[s.metric].append(s)
        per_component = [
            {"metric": metric, "series": sorted(items, key=lambda s: (trouble.get(s.component, never), s.component))}
            for metric, items in sorted(by_metric.items(), key=lambda kv: (min(trouble.get(s.component, never) for s in kv[1]), kv[0]))
        ]
        open_alerts = sum(
            1 for a in alerts if a.state != AlertState.RESOLVED and any(s.metric == a.metric and s.component == a.component for s in in_layer)
        )
        layers.append({"layer": layer, "hint": LAYER_HINT[layer], "run_level": run_level, "per_component": per_component,
                       "open_alerts": open_alerts})
    names = {s.metric for s in series if not s.component}
    headline = headline_metric(names)
    for section in layers:
        section["charted"] = [s for s in section["run_level"] if s.metric != headline]
    ranking = sorted(((step, component) for component, step in trouble.items() if component), key=lambda t: t)
    # Where each of the project's rules links, as the page opens it (a live alert's row links the same way).
    chart = chart_data(run, alerts, headline=headline, rule_links=rule_links(run.project_id, Rule.objects.all()))
    needing = [a for a in alerts if needs_review(a) or unreviewed(a)]
    failed_restores = {row["number"]: row for row in chronicle_attempts(run, times=False) if row["failed_restore"]}
    attempts = list(run.attempts.order_by("number"))
    for attempt in attempts:
        row = failed_restores.get(attempt.number)
        attempt.failed_restore = sorted({a["rule"] for a in row["followed_by"]}) if row else None
    return {
        "run": run,
        "health": health_of(run),
        "incidents": incidents_to_look_at(run, alerts, needing),
        "alerts": sorted(alerts, key=lambda a: (a.state == AlertState.RESOLVED, a.first_step, a.id)),
        "open_alerts": [a for a in alerts if a.state != AlertState.RESOLVED],
        # Alerts that ended with nobody's word on them (a hard invariant, or any alert with no verdict, acknowledgement
        # or decision): the run needs review until someone has looked (alerts/review.py).
        "needs_review": needing,
        "layers": layers,
        "ranking": ranking[:10],
        "budget": budget_words(run.budget) if run.budget else None,
        "config": [(key, identity_words(value)) for key, value in (run.config or {}).items()] if isinstance(run.config, dict) else [],
        "identity_changes": [
            {"field": c.field, "old": identity_text(c.old, c.field), "new": identity_text(c.new, c.field), "step": c.step,
             "changed_at": c.changed_at}
            for c in run.identity_changes.order_by("id")
        ],
        "attempts": attempts,
        "chart": chart,
        "reviews": list(run.reviews.select_related("opened_by").order_by("-opened_at", "-id")[:10]),
        "decisions": run.log_entries.count(),
        "review_schedule": ReviewSchedule.of(run),
    }
