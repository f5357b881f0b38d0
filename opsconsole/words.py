"""Identity values (tags, config, identity changes) as words for people: "key value" lists, yes/no, numbers as
the sender wrote them — never a JSON object or a Python literal on a page."""
from __future__ import annotations


def identity_words(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{key} {identity_words(v)}" for key, v in value.items()) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(identity_words(v) for v in value) or "none"
    return str(value)
