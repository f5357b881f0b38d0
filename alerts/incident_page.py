"""What an incident's own page shows (/incidents/<id>/), gathered in one place: the view stays a few lines."""
from urllib.parse import urlencode

from django.urls import reverse

from alerts import incidents, triage
from alerts.models import Alert, AlertChange, ChangeKind, MuteScope, Verdict

# Steps either side of the incident's first step that its chart link shows (as the channels' run links do).
CHART_STEPS = 100


def inbox_link(incident, anchor: str) -> str:
    """The inbox with every state of the incident's project, at `anchor` (the row the inbox marks as :target)."""
    query = urlencode({"state": "all", "project": incident.run.project.slug})
    return f"{reverse('console:inbox')}?{query}#{anchor}"


def chart_link(incident) -> str:
    """The run page zoomed to the incident's steps, on its origin's metric and component where it has them."""
    origin = incident.origin
    last = max([incident.first_step, *(a.last_step for a in incident.members)])
    params = {k: v for k, v in (("metric", origin and origin.metric), ("component", origin and origin.component)) if v}
    params |= {"start": max(0, incident.first_step - CHART_STEPS), "end": last + CHART_STEPS}
    return reverse("console:run", args=[incident.run.run_id]) + "?" + urlencode(params)


def incident_page(incident, may_act: bool) -> dict:
    incident.members = list(Alert.objects.filter(incident=incident).select_related("rule").prefetch_related("reviews")
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
