"""What an incident's own page shows (/incidents/<id>/), gathered in one place: the view stays a few lines."""
from urllib.parse import urlencode

from django.urls import reverse

from alerts import incidents, triage
from alerts.chart import chart_data, headline_metric, series_exist
from alerts.models import Alert, AlertChange, ChangeKind, MuteScope, Verdict
from ingest.models import Series

# Steps either side of the incident's first step that its chart link shows (as the channels' run links do).
CHART_STEPS = 100


def inbox_link(incident, anchor: str) -> str:
    """The inbox with every state of the incident's project, at `anchor` (the row the inbox marks as :target)."""
    query = urlencode({"state": "all", "project": incident.run.project.slug})
    return f"{reverse('console:inbox')}?{query}#{anchor}"


def chart_steps(incident) -> tuple[int, int]:
    """The steps the incident's charts open on: its alerts' steps, CHART_STEPS either side."""
    last = max([incident.first_step, *(a.last_step for a in incident.members)])
    return max(0, incident.first_step - CHART_STEPS), last + CHART_STEPS


def chart_link(incident) -> str:
    """The run page zoomed to the incident's steps, on its origin's metric and component where it has them."""
    origin = incident.origin
    params = {k: v for k, v in (("metric", origin and origin.metric), ("component", origin and origin.component)) if v}
    start, end = chart_steps(incident)
    params |= {"start": start, "end": end}
    return reverse("console:run", args=[incident.run.run_id]) + "?" + urlencode(params)


def charts(incident) -> list[dict]:
    """The series its page draws: its first alert's (the origin's, else the first with a metric), then the run's
    headline metric when that is another. Only series the run has (a condition alert has no metric to draw)."""
    first = next((a for a in ([incident.origin] if incident.origin else []) + incident.members if a.metric), None)
    wanted = [(first.metric, first.component or "")] if first else []
    names = set(Series.objects.filter(run=incident.run, component="").values_list("metric", flat=True))
    headline = headline_metric(names)
    if headline and (headline, "") not in wanted:
        wanted.append((headline, ""))
    have = series_exist(incident.run, wanted)
    return [{"metric": m, "component": c, "headline": m == headline and not c} for m, c in wanted if (m, c) in have]


def incident_page(incident, may_act: bool) -> dict:
    incident.members = list(Alert.objects.filter(incident=incident).select_related("rule", "run").prefetch_related("reviews")
                            .order_by("first_step", "id"))
    for alert in incident.members:
        alert.link = inbox_link(incident, f"alert-{alert.pk}")
    # One history: the incident's own rows and each of its alerts' rows (acting on an incident writes both).
    rows = [{"at": c.at, "what": f"incident {c.get_kind_display().lower()}", "alert": c.alert,
             "detail": c.get_state_display() if c.state else "", "by": c.by, "step": None}
            for c in incident.changes.select_related("alert__rule", "by")]
    rows += [{"at": c.at, "what": c.get_kind_display().lower(), "alert": c.alert, "by": c.by, "step": c.step,
              "detail": " · ".join(x for x in (c.get_verdict_display() if c.verdict else "", c.note) if x)}
             for c in AlertChange.objects.filter(alert__incident=incident).exclude(kind=ChangeKind.EXTENDED)
             .select_related("alert__rule", "by")]
    rows.sort(key=lambda r: r["at"])
    return {
        "incident": incident,
        "origin_text": incidents.describe_origin(incident.origin) if incident.origin else "—",
        "reach": incidents.blast_radius(incident.members, incident.origin) if incident.origin else [],
        "alerts": incident.members,
        "changes": rows,
        "chart_link": chart_link(incident),
        "charts": charts(incident),
        # run.js's data: the incident's alerts marked, opening on its steps (the address's ?start=&end= wins).
        "chart": chart_data(incident.run, incident.members, steps=chart_steps(incident)),
        "inbox_link": inbox_link(incident, f"incident-{incident.pk}"),
        "reviews": sorted({rv for a in incident.members for rv in a.reviews.all()}, key=lambda rv: rv.pk),
        "may_act": may_act,
        # The forms post to the inbox's incident actions with this page as their `next`: the answer comes back here.
        "action_query": urlencode({"state": "all", "project": incident.run.project.slug}),
        "page_path": reverse("console:incident", args=[incident.pk]),
        "verdicts": Verdict.choices,
        "durations": triage.MUTE_DURATIONS,
        "scopes": MuteScope.choices,
        "max_mute": triage.max_duration_words(incident.run.project_id),
    }
