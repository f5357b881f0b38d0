"""Reading the decision log: the entries a person may see, filtered, and its JSONL export."""
import orjson
from django.core.serializers.json import DjangoJSONEncoder

from opsconsole.permissions import visible_projects
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


def _default(value):
    return DjangoJSONEncoder().default(value)


def jsonl_lines(rows, as_dict=entry_as_dict, chunk=500):
    """One JSON object per row and line (`as_dict(row)`), read from the database in chunks (an export never holds the whole log).

    Times are ISO 8601; values are written as the API writes them (non-finite numbers as the contract's strings).
    """
    for row in rows.iterator(chunk_size=chunk):
        yield orjson.dumps(as_dict(row), default=_default) + b"\n"
