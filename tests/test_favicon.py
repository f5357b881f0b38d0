"""The console has its own icon, served by itself (no 404 in every browser's first request, nothing fetched from outside)."""
import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def body(response):
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_favicon_ico_is_an_icon_served_by_the_console():
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] in {"image/x-icon", "image/vnd.microsoft.icon"}
    assert body(response)[:4] == b"\x00\x00\x01\x00"  # the ICO header


def test_every_page_links_an_icon_the_console_serves():
    html = Client().get("/accounts/login/").content.decode()
    href = re.search(r'<link rel="icon" href="([^"]+)"', html)
    assert href and href[1].startswith("/static/")
    response = Client().get(href[1])
    assert response.status_code == 200 and body(response).lstrip().startswith(b"<svg")
