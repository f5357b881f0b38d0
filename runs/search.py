"""Free-text search over runs: the words a reviewer remembers of a run (its id, its name, a tag key or value)."""
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast


def search_runs(runs, text: str | None):
    """`runs` narrowed to those whose run id, name or any tag key or value contains `text`, ignoring case.

    The tags are matched as their JSON text in the database (one query, the list's limit still applied there), so a
    search also matches across a key and its value ("team": "pretrain"); a blank search leaves `runs` as it is.
    A search written as the runs list shows a tag, `key=value`, also finds the runs whose tag `key` contains
    `value` (the JSON text reads `"key": "value"`, which `key=value` never matched).
    """
    text = (text or "").strip()
    if not text:
        return runs
    found = Q(run_id__icontains=text) | Q(name__icontains=text) | Q(tags_text__icontains=text)
    runs = runs.annotate(tags_text=Cast("tags", output_field=TextField()))
    key, equals, value = text.partition("=")
    if equals and key.strip() and value.strip():
        # The key is data, never part of a lookup (as the Tag filter does): "a__regex" is a tag named that.
        runs = runs.annotate(searched_tag=KeyTextTransform(key.strip(), "tags"))
        found |= Q(searched_tag__icontains=value.strip())
    return runs.filter(found)
