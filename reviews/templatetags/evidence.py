"""`{% load evidence %}`: links of the decision log and the review's steps, shown as links only when they stay in the console."""
from django import template

from reviews.lifecycle import console_path

register = template.Library()


@register.filter
def console_link(href) -> bool:
    """`{% if e.href|console_link %}`: an entry stored before links were checked as they are now is shown as text."""
    return console_path(href)
