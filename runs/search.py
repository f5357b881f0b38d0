"""Free-text search over runs: the words a reviewer remembers of a run (its id, its name, a tag key or value)."""
from django.db.models import Q, TextField
from django.db.models.functions import Cast


def search_runs(runs, text: str | None):
    """`runs` narrowed to those whose run id, name or any tag key or value contains `text`, ignoring case.

    The tags are matched as their JSON text in the database (one query, the list's limit still applied there), so a
    search also matches across a key and its value ("team": "pretrain"); a blank search leaves `runs` as it is.
    """
    text = (text or "").strip()
    if not text:
        return runs
    return runs.annotate(tags_text=Cast("tags", output_field=TextField())).filter(
        Q(run_id__icontains=text) | Q(name__icontains=text) | Q(tags_text__icontains=text))
