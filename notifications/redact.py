"""What of a channel's URL a member who is not a rule admin sees: its host alone.

A channel's URL is often the credential itself (a Slack incoming webhook's path, `http://user:pass@host/`, a
token in the query), so pages and the API show it in full only where `can_see_channel_url` says so
(opsconsole/permissions.py); others get `url_host`, and the delivery log's detail with any URL in it cut to
its host and the channel's own userinfo, path and query taken out.
"""
import re
from urllib.parse import unquote, urlsplit

HIDDEN = "…"
# A URL in free text (an error's detail, a redirect's Location): up to the next blank or quote.
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# Shorter parts of a URL ("/", "?a") are not worth hiding, and replacing them would garble the detail's words.
MIN_HIDDEN = 4


def url_host(url) -> str:
    """`host` or `host:port` of a URL (IPv6 in brackets); "" when it has none."""
    if not isinstance(url, str) or not url:
        return ""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number, an unbalanced bracket
        try:
            host, port = urlsplit(url).hostname, None
        except ValueError:
            return ""
    if not host:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port is not None else host


def _secret_parts(url) -> list[str]:
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return [url]
    userinfo = parts.netloc.rpartition("@")[0]
    candidates = [url, userinfo, password or "", parts.path, parts.query, parts.fragment]
    candidates += [unquote(c) for c in candidates if c]
    return sorted({c for c in candidates if c and len(c) >= MIN_HIDDEN}, key=len, reverse=True)


def redact_detail(detail: str, url: str) -> str:
    """A delivery's detail as a member who may not see the channel's URL reads it."""
    if not detail:
        return detail
    text = URL_IN_TEXT.sub(lambda m: url_host(m.group()) or HIDDEN, detail)
    for part in _secret_parts(url or ""):
        text = text.replace(part, HIDDEN)
    return text
