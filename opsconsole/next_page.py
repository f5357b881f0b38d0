"""Where a form sends a person back after acting: the page it was posted from (its `next` field), when that names a
page of this console.

Only a local path is taken: "/incidents/7/" yes; "https://elsewhere/", "//elsewhere/", "/\\elsewhere" (a browser
reads the last two as another host) and anything not starting with "/" are ignored, so a crafted link cannot
use the console's redirect to send a reviewer off-site.
"""
from django.utils.http import url_has_allowed_host_and_scheme


def local_path(value: str | None) -> str | None:
    """`value` when it is a path on this console, else None."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or any(c in value for c in "\r\n\t\\"):
        return None
    return value if url_has_allowed_host_and_scheme(value, allowed_hosts=None) else None


def back_to(request, default: str | None) -> str | None:
    """The posted form's `next` when it is a local path, else `default`."""
    return local_path(request.POST.get("next")) or default
