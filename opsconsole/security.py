"""Content-Security-Policy on every response when DEBUG is off (Django 5.2 has no CSP middleware of its own).

The console serves everything itself — its scripts, styles and Plotly — and
runs no inline script or handler, so everything comes from 'self' only;
websockets go back to the host the page came from. One exception, by nonce:
Plotly adds `<style>` elements from its script (its CSS rules), so the run
page loads static/js/csp-styles.js with the request's nonce
(`request.csp_nonce`), which gives that nonce to the style elements scripts
create; styles from markup still need 'self'. HSTS is Django's
SecurityMiddleware (settings.SECURE_HSTS_SECONDS, on https requests). Debug
pages (DEBUG on) carry inline scripts and styles: no policy there.
"""
import secrets

from django.conf import settings
from django.core.exceptions import DisallowedHost

STATIC_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    # Plotly sets inline styles from its scripts (its own <style> rules and style attributes on
    # the charts' SVG): without this the charts lose their layout. Scripts stay 'self' only.
    "img-src": "'self' data:",
    "font-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def content_security_policy(request, nonce: str) -> str:
    try:
        host = request.get_host()
    except DisallowedHost:  # the 400 answering a bad Host header: no websocket to allow
        host = None
    directives = {
        **STATIC_POLICY,
        "style-src": f"'self' 'nonce-{nonce}'",
        "connect-src": f"'self' ws://{host} wss://{host}" if host else "'self'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.csp_nonce = secrets.token_urlsafe(16)
        response = self.get_response(request)
        if not settings.DEBUG and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(request, request.csp_nonce)
        return response
