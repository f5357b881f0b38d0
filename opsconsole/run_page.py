"""What the run page shows, gathered in one place (the view stays a few lines)."""
from collections import defaultdict

from alerts.alert_views import alert_as_dict
from alerts.models import Alert, AlertState
from ingest.models import Layer, Series
from ingest.phases import phase_spans
from ingest.serializers import AttemptSerializer

LAYER_ORDER = [Layer.OPTIMIZATION, Layer.NUMERICS, Layer.GENERALIZATION, Layer.DATA, Layer.SYSTEM]
LAYER_HINT = {
    Layer.SYSTEM: "throughput, step time, hardware",
    Layer.DATA: "data loading and batches",
    Layer.NUMERICS: "gradients, weights, activations per component",
    Layer.OPTIMIZATION: "loss, learning rate, updates",
    Layer.GENERALIZATION: "validation and evaluation",
}
# The headline chart: the first of these the run sends.
HEADLINE_METRICS = ["loss", "train_loss", "val_loss"]


def first_trouble(alerts):
    """Per component, the first step at which any alert of it began: the first to go wrong sorts first."""
    first = {}
    for alert in alerts:
        if alert.component not in first or alert.first_step < first[alert.component]:
            first[alert.component] = alert.first_step
    return first


def run_page(run) -> dict:
    alerts = list(Alert.objects.filter(run=run).select_related("rule", "run").order_by("first_step", "id"))
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
    headline = next((m for m in HEADLINE_METRICS if m in names), None)
    for section in layers:
        section["charted"] = [s for s in section["run_level"] if s.metric != headline]
    ranking = sorted(((step, component) for component, step in trouble.items() if component), key=lambda t: t)
    spans = phase_spans(run)
    chart = {
        "run": run.run_id,
        "max_step": run.max_step,
        "phases": [{"start": s.start, "end": s.end, "phase": s.phase, "kind": s.kind} for s in spans if s.kind != "steady"],
        "attempts": AttemptSerializer(run.attempts.all(), many=True).data,
        "alerts": [alert_as_dict(a) for a in alerts],
        "headline": headline,
    }
    return {
        "run": run,
        "alerts": sorted(alerts, key=lambda a: (a.state == AlertState.RESOLVED, a.first_step, a.id)),
        "open_alerts": [a for a in alerts if a.state != AlertState.RESOLVED],
        "layers": layers,
        "ranking": ranking[:10],
        "identity_changes": list(run.identity_changes.order_by("id")),
        "attempts": list(run.attempts.order_by("number")),
        "chart": chart,
    }
