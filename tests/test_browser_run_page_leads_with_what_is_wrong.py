"""In Chromium at 1366×768: the run page opens on the run's open incident and its headline chart, and the
channels' incident link (/inbox/?state=all#incident-N) scrolls the inbox to that incident and marks it."""
import httpx
import pytest

from alerts.incidents import group_new_alerts
from ingest.models import Run
from tests.browser import log_in, screenshot
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]


@pytest.fixture
def troubled_run(console_server, project, token, owner):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 1000} for s in range(0, 600, 5)]
    response = httpx.post(console_server.url + "/api/v1/ingest", json={
        "run": {"id": "pythia-410m-seed4", "tags": {"team": "pretrain", "size": "410m"}, "code_rev": "a1b2c3d",
                "data_snapshot": "pile-dedup-v2", "config": {"lr": 3e-4}}, "points": points},
        headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202, response.text
    grads = make_rule(project, "nonfinite-gradients", kind="nonfinite", scope={"metrics": ["weight_norm", "grad_norm"]})
    run = Run.objects.get(run_id="pythia-410m-seed4")
    make_alert(grads, run, "layers.4", metric="weight_norm", first_step=430)
    [incident] = group_new_alerts(run)
    # Later alerts on other runs fill the inbox above it: the link has to scroll to reach it.
    spike = make_rule(project, "gradient-explosion", kind="threshold", scope={"metrics": ["grad_norm"]}, response="review")
    for i in range(25):
        make_alert(spike, f"pythia-410m-seed{10 + i}", "", metric="grad_norm", first_step=100 + i)
    return console_server, incident


def test_the_run_page_and_the_incident_link_lead_with_what_is_wrong(browser, troubled_run):
    server, incident = troubled_run
    page = log_in(browser, server, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(server.url + "/runs/pythia-410m-seed4/")
    page.wait_for_selector("#headline-chart .main-svg")
    card = page.locator("#run-incidents").bounding_box()
    chart = page.locator("#headline-chart").bounding_box()
    assert card["y"] + 40 < 768, card  # the card and its first incident
    assert page.locator(f'#run-incidents [data-incident-id="{incident.pk}"]').bounding_box()["y"] < 768
    assert chart["y"] + 100 < 768, chart  # the headline chart's top, plotted, before the fold
    assert page.locator("section.identity").bounding_box()["y"] > chart["y"]
    screenshot(page, "run-page-leads-with-what-is-wrong")

    # The card's link is the channels' incident_url: it lands on the incident in the inbox and marks it.
    page.locator(f'#run-incidents [data-incident-id="{incident.pk}"] a').first.click()
    page.wait_for_selector(f"#incident-{incident.pk}")
    assert "state=all" in page.url and page.url.endswith(f"#incident-{incident.pk}")
    row = page.locator(f"#incident-{incident.pk}")
    page.wait_for_function(f"() => document.getElementById('incident-{incident.pk}').matches(':target')")
    box = row.bounding_box()
    assert box["y"] >= 0 and box["y"] + 20 <= 768, box  # scrolled into view
    assert page.evaluate("() => window.scrollY") > 0  # it was below the fold and the page went to it
    outline = page.evaluate(f"() => getComputedStyle(document.getElementById('incident-{incident.pk}')).outlineStyle")
    background = page.evaluate(f"() => getComputedStyle(document.querySelector('#incident-{incident.pk} > td')).backgroundColor")
    assert outline == "solid" and background == "rgb(255, 244, 194)", (outline, background)
    screenshot(page, "inbox-incident-targeted")

    # An alert's own link shows its row even while its incident is collapsed.
    [member] = incident.run.alerts.filter(incident=incident)
    page.goto(server.url + f"/inbox/?state=all#alert-{member.pk}")
    page.wait_for_function(f"() => document.getElementById('alert-{member.pk}').matches(':target')")
    assert page.locator(f"#alert-{member.pk}").is_visible()
    assert page.locator(f"#incident-{incident.pk} button.incident-toggle").get_attribute("aria-expanded") == "false"
