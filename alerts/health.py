"""A run's health as the console words it: the one place that decides whether a run may be called "Healthy".

The stored `Run.status` is what the last evaluated batch said (healthy when none of its points held a rule). A run
whose incident is still open, or whose alert ended with nobody's word on it (alerts/review.py), is not healthy for
a reader even when its latest points are fine: its header, its row in the runs list and its live frames say so.
"""
from dataclasses import dataclass

from django.db.models import Q

from alerts.models import Alert, AlertState, Incident, IncidentState
from alerts.review import needs_review_q, run_ids_needing_review, runs_needing_review, unreviewed_q
from ingest.models import Run, RunStatus
from opsconsole.live import publish

# An incident someone still has to deal with (a needs-review one is counted by runs_needing_review).
OPEN_INCIDENT = (IncidentState.FIRING, IncidentState.ACKNOWLEDGED, IncidentState.MUTED)


@dataclass(frozen=True)
class Health:
    key: str  # the badge's class: status-<key>
    word: str


def health(status: str, *, open_trouble: bool, needs_review: bool) -> Health:
    """The word for a run of `status` that has an open incident or alert (`open_trouble`) or something nobody
    looked at (`needs_review`): never "Healthy" while either holds."""
    if status == RunStatus.HEALTHY:
        if open_trouble:
            return Health(RunStatus.ALERTING, RunStatus.ALERTING.label)
        if needs_review:
            # Its points are fine again, but nobody has said what happened: "needs review" stands beside it.
            return Health("recovered", "Recovered")
    return Health(str(status), RunStatus(status).label if status in RunStatus.values else str(status))


def runs_with_open_trouble(runs) -> set[int]:
    """The pks of `runs` (a queryset or pks) with an open incident or an alert still open."""
    return (set(Incident.objects.filter(run__in=runs, state__in=OPEN_INCIDENT).values_list("run_id", flat=True))
            | set(Alert.objects.filter(run__in=runs).exclude(state=AlertState.RESOLVED).values_list("run_id", flat=True)))


def filter_by_health(runs, status: str):
    """`runs` (a queryset) narrowed to those whose badge reads `status`: the runs list's filter says what its
    badges say, so "Healthy" never lists a run with an open incident or an alert nobody looked at."""
    trouble = (Q(pk__in=Incident.objects.filter(state__in=OPEN_INCIDENT).values("run_id"))
               | Q(pk__in=Alert.objects.exclude(state=AlertState.RESOLVED).values("run_id")))
    unlooked = Q(pk__in=Alert.objects.filter(needs_review_q() | unreviewed_q()).values("run_id"))
    if status == RunStatus.HEALTHY:
        return runs.filter(status=RunStatus.HEALTHY).exclude(trouble).exclude(unlooked)
    if status == RunStatus.ALERTING:
        return runs.filter(Q(status=RunStatus.ALERTING) | Q(status=RunStatus.HEALTHY) & trouble)
    return runs.filter(status=status)


def health_of_runs(runs) -> dict[int, Health]:
    """Each run's health by pk (`runs`: Run objects), in two queries whatever their number."""
    pks = [run.pk for run in runs]
    troubled, unlooked = runs_with_open_trouble(pks), runs_needing_review(pks)
    return {run.pk: health(run.status, open_trouble=run.pk in troubled, needs_review=run.pk in unlooked) for run in runs}


def health_of(run) -> Health:
    return health_of_runs([run])[run.pk]


def health_frame(run) -> dict:
    """What a live frame carries of it (a fresh read: called when the frame is built, at commit)."""
    current = Run.objects.only("pk", "status").get(pk=run.pk)
    found = health_of(current)
    return {"health": found.key, "label": found.word}


def publish_review_mark(run) -> None:
    """Tell the run's and its project's listeners what the run's mark and the project's "needs review" list are
    now (built at commit, the last of a batch's only: opsconsole/live.py)."""
    def frame():
        found = health_frame(run)
        runs = run_ids_needing_review(Alert.objects.filter(run__project_id=run.project_id))
        return {"needs_review": run.run_id in runs, **found, "runs": runs}

    publish(run, "review", frame)
