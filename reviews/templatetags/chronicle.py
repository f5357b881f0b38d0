from django import template

register = template.Library()


@register.filter
def percent(share):
    """`{{ 0.4286|percent }}` → "42.9%"; "—" for None."""
    return "—" if share is None else f"{100 * share:.1f}%"


@register.filter
def duration(seconds):
    """Seconds in the largest unit that reads well: "42 s", "12.5 min", "3.2 h"; "—" for None."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
