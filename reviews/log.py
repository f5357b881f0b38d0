"""Reading the decision log: the entries a person may see, filtered, and its JSONL export."""

from opsconsole.permissions import visible_projects
from opsconsole.streaming import segmented_lines
from reviews.models import LogEntry
from reviews.wire import entry_as_dict


def entries_for(user, *, run=None, project=None, decision=None, owner=None, since=None, until=None):
    """Entries of the projects the user may see, oldest first. decision="none": entries written outside a review."""
    entries = LogEntry.objects.filter(project__in=visible_projects(user)).select_related("project", "run", "author")
    if run:
        entries = entries.filter(run__run_id=run)
    if project:
        entries = entries.filter(project__slug=project)
    if decision == "none":
        entries = entries.filter(decision="")
    elif decision:
        entries = entries.filter(decision=decision)
    if owner:
        entries = entries.filter(owner__icontains=owner)
    if since:
        entries = entries.filter(at__gte=since)
    if until:
        entries = entries.filter(at__lte=until)
    return entries.prefetch_related("corrections").order_by("at", "id")


def jsonl_lines(rows, as_dict=entry_as_dict, chunk=500):
    """One JSON object per row and line (`as_dict(row)`) of rows ordered by (at, id), read in segments with no
    database connection held while a slow client reads (opsconsole/streaming.py).

    Times are ISO 8601; values are written as the API writes them (non-finite numbers as the contract's strings).
    """
    return segmented_lines(rows, "at", as_dict, chunk=chunk)
