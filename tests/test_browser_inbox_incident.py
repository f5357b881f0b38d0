"""In Chromium: the inbox shows one row per incident; expanding it shows its alerts; acknowledging it
acknowledges each of them (no script needed for the action, a small one for expanding)."""
import pytest

from alerts.incidents import group_new_alerts
from alerts.models import AlertChange
from ingest.models import Run
from tests.browser import log_in, screenshot
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]


@pytest.fixture
def incident(console_server, project, owner):
    health = make_rule(project, "nonfinite-gradients", kind="nonfinite", scope={"metrics": ["weight_norm", "grad_norm"]})
    loss = make_rule(project, "nonfinite-loss", kind="nonfinite", scope={"metrics": ["loss"]}, response="review")
    alerts = [make_alert(health, "llama-ft-7", "layers.4", metric="weight_norm", first_step=30)]
    alerts += [make_alert(health, "llama-ft-7", f"layers.{i}", metric="grad_norm", first_step=30) for i in (0, 1, 2)]
    alerts.append(make_alert(loss, "llama-ft-7", "", metric="loss", first_step=30))
    [made] = group_new_alerts(Run.objects.get(run_id="llama-ft-7"))
    return made, alerts


def test_on_call_expands_an_incident_and_acknowledges_it(browser, console_server, incident, owner):
    made, alerts = incident
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/inbox/")
    page.wait_for_selector("#inbox-table")
    row = page.locator(f"#incident-{made.pk}")
    assert page.locator("tr.incident-row").count() == 1
    assert "weight_norm of layers.4 at step 30" in row.inner_text() and "Review" in row.inner_text()
    members = page.locator(f'tr.incident-member[data-incident="{made.pk}"]')
    assert members.count() == len(alerts)
    assert not any(members.nth(i).is_visible() for i in range(len(alerts)))  # collapsed: one row for the fault

    row.locator("button.incident-toggle").click()
    assert all(members.nth(i).is_visible() for i in range(len(alerts)))
    assert row.locator("button.incident-toggle").get_attribute("aria-expanded") == "true"
    screenshot(page, "inbox-incident-expanded")

    row.locator('button[data-action="acknowledge"]').click()
    page.wait_for_selector("#inbox-messages")
    assert f"Acknowledged incident #{made.pk} on llama-ft-7: {len(alerts)} alert{'s' if len(alerts) != 1 else ''}." in page.inner_text("#inbox-messages")
    assert page.locator(f"#incident-{made.pk}").get_attribute("data-state") == "acknowledged"
    rows = AlertChange.objects.filter(kind="acknowledged", by=owner)
    assert sorted(rows.values_list("alert_id", flat=True)) == sorted(a.pk for a in alerts)
    screenshot(page, "inbox-incident-acknowledged")
