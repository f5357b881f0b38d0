from django import template

from alerts.starter import console_link as _console_link
from opsconsole.words import identity_words

register = template.Library()


@register.filter
def console_link(url):
    """`{{ rule.diagnostic_url|console_link }}`: alerts.starter.console_link."""
    return _console_link(url)


@register.filter
def item(mapping, key):
    """`{{ row|item:key }}`: a dict's value by a key held in a variable (None when absent)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def identity(value):
    """`{{ v|identity }}`: a tag's or config's value in words (opsconsole.words.identity_words)."""
    return identity_words(value)
