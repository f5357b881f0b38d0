"""The run page shows identity values as a person writes them (no Python dicts) and names every chart, the headline too."""
import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_page(sender, owner):
    def fetch():
        client = Client()
        client.force_login(owner)
        response = client.get("/runs/llmc/")
        assert response.status_code == 200
        return response.content.decode()

    first = {"id": "llmc", "budget": {"steps": 19560}, "config": {"lr": 0.0006, "compile": True, "schedule": None},
             "tags": {"team": "pretrain"}}
    assert sender.post({"run": first, "points": [{"step": 0, "metric": "loss", "value": 11.0}]}).status_code == 202
    second = {"id": "llmc", "budget": {"steps": 20000, "gpu_hours": 12.5, "deadline": "2026-12-01T12:00:00+00:00"}}
    assert sender.post({"run": second, "points": [{"step": 1, "metric": "loss", "value": 10.5}]}).status_code == 202
    return fetch()


def test_the_budget_reads_as_words(run_page):
    identity = run_page[run_page.index("<h2>Identity</h2>"):run_page.index('id="run-reviews"')]
    assert "20,000 steps" in identity and "12.5 GPU hours" in identity and "deadline 2026-12-01 12:00:00 UTC" in identity
    assert "{'" not in identity and "'}" not in identity  # no Python dict anywhere in the identity panel


def test_an_identity_change_reads_as_words(run_page):
    changes = run_page[run_page.index("Identity changes"):]
    assert "19,560 steps" in changes and "20,000 steps" in changes
    assert "{&#x27;" not in changes and "{'" not in changes


def test_the_config_is_shown_as_keys_and_values(run_page):
    config = re.search(r'<dl class="kv config">(.*?)</dl>', run_page, re.S)[1]
    assert re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", config) == [("lr", "0.0006"), ("compile", "yes"), ("schedule", "—")]


def test_the_headline_chart_has_a_title(run_page):
    head = run_page[run_page.index('id="headline-chart"') - 400:run_page.index('id="headline-chart"')]
    caption = re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", head, re.S)
    assert caption and "loss" in caption[-1]
