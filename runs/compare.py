"""The run page's "Compare with": which runs a run may be drawn beside, and the one a shared link names.

Only another run of the same project that the viewer sees can be compared with; a run id naming anything
else (no such run, another project's, one the viewer may not see) reads exactly like no choice at all, so
the page and the chart data never tell a guessed id from a real one.
"""
from django.db.models import F

from ingest.models import Run
from opsconsole.permissions import visible_runs
from reviews.models import Review
from runs.search import search_runs

# The select lists at most this many of the project's other runs (newest first); a search narrows them.
COMPARE_LIMIT = 100


def comparable_runs(user, run):
    """The runs `run` may be drawn beside: its project's other runs that `user` sees."""
    return visible_runs(user).filter(project_id=run.project_id).exclude(pk=run.pk)


def compared_run(user, run, run_id) -> Run | None:
    """The run `run_id` names, if it may be drawn beside `run` for `user`; None otherwise (never why)."""
    if not run_id:
        return None
    return comparable_runs(user, run).filter(run_id=run_id).first()


def run_label(run) -> str:
    """How a compared run is named on the charts: its name, or its id when it has none."""
    return run.name or run.run_id


def compare_choices(user, run, chosen_id=None, text=None) -> dict:
    """What the Compare-with control offers.

    References first: the project's reference runs and the runs this run's reviews compared it with (the
    comparisons a reviewer already trusts), then the project's other runs by last data, newest first,
    narrowed by `text` (the runs search). The chosen run is always listed, even when it is older than the
    list's limit or outside the search.
    """
    newest = (F("last_seen_at").desc(nulls_last=True), "-id")
    others = comparable_runs(user, run)
    reviewed = Review.objects.filter(run=run, comparison__isnull=False).values("comparison_id")
    references = list(others.filter(reference=True).order_by(*newest)) + list(
        others.filter(pk__in=reviewed, reference=False).order_by(*newest))
    seen = {r.pk for r in references}
    rest = [r for r in search_runs(others.exclude(pk__in=seen), text).order_by(*newest)[:COMPARE_LIMIT]]
    chosen = compared_run(user, run, chosen_id)
    if chosen is not None and chosen.pk not in seen and all(r.pk != chosen.pk for r in rest):
        rest.insert(0, chosen)
    return {"references": references, "others": rest, "chosen": chosen, "search": (text or "").strip(),
            "label": run_label(run)}
