"""What static/js/run.js draws a run's charts from (the page's `run-chart-data`): the run's phases, attempts and the
alerts to mark, its last step, the headline metric and, where a page opens on some steps, that range.

The run page shows every alert of the run over the whole run; an incident's page the incident's alerts over its
steps. Both draw with the same script from the same series API (/api/v1/runs/<id>/series/)."""
from alerts.starter import console_link
from alerts.wire import alert_as_dict
from ingest.models import Series
from ingest.phases import phase_spans
from ingest.serializers import AttemptSerializer

# The headline chart: the first of these the run sends.
HEADLINE_METRICS = ["loss", "train_loss", "val_loss"]


def headline_metric(run_level_metrics) -> str | None:
    """The run's headline metric among the names of its run-level series."""
    return next((m for m in HEADLINE_METRICS if m in run_level_metrics), None)


def chart_data(run, alerts, *, headline=None, rule_links=None, steps=None) -> dict:
    """`alerts`: those marked on the charts (rule loaded); `rule_links`: {rule pk: its diagnostic link as the page
    opens it} (a live alert's row); `steps`: [start, end] the charts open on, where the address names none."""
    data = {
        "run": run.run_id,
        "max_step": run.max_step,
        "phases": [{"start": s.start, "end": s.end, "phase": s.phase, "kind": s.kind} for s in phase_spans(run) if s.kind != "steady"],
        "attempts": AttemptSerializer(run.attempts.all(), many=True).data,
        "alerts": [alert_as_dict(a) for a in alerts],
        "headline": headline,
        "links": rule_links or {},
    }
    if steps is not None:
        data["range"] = list(steps)
    return data


def rule_links(project_id, rules) -> dict:
    return {pk: console_link(url) for pk, url in rules.filter(project_id=project_id).values_list("pk", "diagnostic_url")}


def series_exist(run, pairs) -> set[tuple[str, str]]:
    """Which of the (metric, component) pairs the run has a series of: a chart of one it lacks would only say so."""
    metrics = {m for m, _ in pairs}
    have = set(Series.objects.filter(run=run, metric__in=metrics).values_list("metric", "component"))
    return {p for p in pairs if p in have}
