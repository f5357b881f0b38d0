"""`{% load times %}`: every time the console shows, in one format with its zone ("2026-12-02 14:05:09 UTC"),
inside a <time datetime> element that static/js/local-time.js rewrites to the viewer's zone on request."""
from __future__ import annotations

from datetime import datetime, timezone

from django import template
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

register = template.Library()

FORMAT = "%Y-%m-%d %H:%M:%S UTC"


def as_utc(value) -> datetime | None:
    """A datetime, or an ISO 8601 string (the audit report keeps its period as strings for its JSON), in UTC;
    a naive one is taken as UTC, the console's stored zone."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


@register.filter
def when_text(value) -> str:
    """The time as plain text, for attributes and places HTML cannot go."""
    moment = as_utc(value)
    return moment.strftime(FORMAT) if moment else "—"


@register.filter
def when(value):
    """`{{ alert.fired_at|when }}`: the time in the console's one format, machine-readable for the local-time toggle."""
    moment = as_utc(value)
    if moment is None:
        return "—"
    return format_html('<time datetime="{}">{}</time>', moment.isoformat().replace("+00:00", "Z"), moment.strftime(FORMAT))
