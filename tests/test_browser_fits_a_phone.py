"""In Chromium at 360×740 (a phone): the pages a reviewer uses at 3 a.m. never make the page scroll sideways, every
nav entry can be reached, and the inbox's actions are on screen; at 1440×900 the audit report shows all its columns.

With WL_SCREENSHOTS=1 the run also saves the inbox and the run page at 1440 and 390 wide into docs/screenshots/."""
import os
from pathlib import Path

import numpy as np
import pytest

from alerts.incidents import group_new_alerts
from ingest.models import Run
from tests.audit_support import fire
from tests.browser import log_in
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]
RUN = "pretrain-llama-3-8b-ablation-seq8192-lr3e-4-warmup2000-seed4"
NAV = ["Runs", "Rules", "Inbox", "Decisions", "Reports", "Channels", "Log out"]
DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


@pytest.fixture
def phone_project(console_server, project, token, owner):
    """A run with a loss chart, an incident of several alerts on it, lone alerts with long names, and a rule report."""
    import httpx

    rng = np.random.default_rng(4)
    loss = 3.0 * np.exp(-np.arange(400) / 200) + 2.0 + rng.normal(0, 0.02, 400)
    points = [{"step": s, "metric": "loss", "value": float(loss[s])} for s in range(400)]
    response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": RUN, "tags": {"team": "pretrain"}},
                          "points": points}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202, response.text
    health = make_rule(project, "nonfinite-gradients", kind="nonfinite", scope={"metrics": ["weight_norm", "grad_norm"]})
    spike = make_rule(project, "gradient-explosion", kind="threshold", scope={"metrics": ["grad_norm"]}, response="review")
    for i in range(3):
        make_alert(health, RUN, f"model.layers.{i}.self_attn.q_proj.lora_A.default", metric="grad_norm", first_step=300)
    group_new_alerts(Run.objects.get(run_id=RUN))
    for i in range(3):
        make_alert(spike, f"{RUN}-rerun{i}", f"model.layers.{i}.mlp.down_proj", first_step=123456 + i, magnitude=1234.5678)
    fire(spike, 30, run="pretrain-llama-3-8b-ablation-seq8192-lr3e-4-warmup2000-seed9", resolved=50)
    return console_server


def overflow(page):
    """How far the page itself scrolls sideways (0: it does not)."""
    return page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")


def within_width(page, locator, width):
    box = locator.bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1


def save(page, name, folder):
    """The page as the docs show it: into docs/screenshots/ with WL_SCREENSHOTS=1, else into `folder`."""
    folder = DOCS_SCREENSHOTS if os.environ.get("WL_SCREENSHOTS") == "1" else folder
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def test_a_reviewer_on_a_phone(browser, phone_project):
    server = phone_project
    page = log_in(browser, server, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 360, "height": 740})
    pages = {"inbox": "/inbox/", "run": f"/runs/{RUN}/", "audit report": "/reports/rules/?project=pretrain",
             "rules": "/rules/", "channels": "/channels/", "runs": "/"}
    too_wide = {}
    for name, path in pages.items():
        page.goto(server.url + path)
        page.wait_for_load_state("load")
        if overflow(page) > 1:
            too_wide[name] = page.evaluate("() => document.documentElement.scrollWidth")
    assert too_wide == {}, f"at 360 px these pages scroll sideways (their widths): {too_wide}"

    # Every nav entry is on screen, or one tap on the menu away.
    page.goto(server.url + "/inbox/")
    page.wait_for_selector("#inbox-table")
    menu = page.locator("header.top details.menu > summary")
    if menu.count() and menu.is_visible():
        menu.click()
    for label in NAV:
        entry = page.locator("header.top").get_by_role("button" if label == "Log out" else "link", name=label, exact=True)
        assert entry.is_visible(), f"{label} is not shown"
        assert within_width(page, entry, 360), f"{label} is off screen: {entry.bounding_box()}"
    if menu.count() and menu.is_visible():
        menu.click()

    # The incident's and a lone alert's actions are within the screen's width, and a panel opens on screen.
    for selector in ("tr.incident-row [data-action=acknowledge]", "tr.incident-row summary[data-action=verdict]",
                     "tr.incident-row summary[data-action=mute]", "tr.inbox-row:not([hidden]) button[data-action=acknowledge]",
                     "tr.inbox-row:not([hidden]) summary[data-action=verdict]", "tr.inbox-row:not([hidden]) summary[data-action=mute]"):
        control = page.locator(selector).first
        control.scroll_into_view_if_needed()
        assert control.is_visible() and within_width(page, control, 360), f"{selector} is off screen: {control.bounding_box()}"
    page.locator("tr.incident-row summary[data-action=verdict]").first.click()
    panel = page.locator("tr.incident-row form[data-action=verdict]").first
    for control in (panel.locator("input[name=verdict]").first, panel.locator("textarea[name=note]"),
                    panel.locator("button[type=submit]")):
        assert within_width(page, control, 360), f"the verdict panel is off screen: {control.bounding_box()}"
    assert overflow(page) <= 1

    # The run page: its open alerts and its headline chart fit the screen.
    page.goto(server.url + f"/runs/{RUN}/")
    page.wait_for_selector("#headline-chart .main-svg")
    chart = page.locator("#headline-chart")
    assert within_width(page, chart, 360), f"the headline chart is wider than the screen: {chart.bounding_box()}"
    assert page.locator("#run-alerts").is_visible()
    assert within_width(page, page.locator("#run-alerts").locator("xpath=ancestor::section[1]"), 360)
    assert overflow(page) <= 1


def test_the_audit_report_shows_every_column_at_1440(browser, phone_project):
    page = log_in(browser, phone_project, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(phone_project.url + "/reports/rules/?project=pretrain")
    page.wait_for_selector("#report-table")
    assert overflow(page) <= 1
    # Seen as the page opens: no column hides past the right edge of the report's box or of the screen.
    box = page.evaluate("() => { const r = document.querySelector('#report-table').parentElement.getBoundingClientRect();"
                        " return r.right }")
    headers = page.locator("#report-table thead th")
    for label in ("Last fired", "Revisions", "Link", "Flags"):
        cell = headers.filter(has_text=label).first
        right = cell.bounding_box()["x"] + cell.bounding_box()["width"]
        assert right <= min(box, 1440) + 1, f"{label} is cut off at {right:.0f} px (the box ends at {box:.0f})"
    flags = page.locator("#report-table tbody tr").first.locator("td").last
    assert flags.locator("[data-flag]").count() and within_width(page, flags, 1440)


def test_the_docs_screenshots_show_the_inbox_and_the_run_page_at_1440_and_390(browser, phone_project, tmp_path):
    # The docs' screenshots come from this run (WL_SCREENSHOTS=1 writes them into docs/screenshots/); each is the
    # page as wide as the screen, with nothing sideways.
    page = log_in(browser, phone_project, "olivia", "pw-olivia")
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for name, url, ready in (("inbox", "/inbox/", "#inbox-table"), ("run", f"/runs/{RUN}/", "#headline-chart .main-svg")):
            page.goto(phone_project.url + url)
            page.wait_for_selector(ready)
            assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1, f"{name} at {width}"
            path = save(page, f"{name}-{width}", tmp_path)
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# Each word (4 or more letters, of a plain word or a hyphenated one) that the page lays out over more than one line:
# a word broken inside itself. An identifier or address (dots, underscores, slashes) may break where it must.
SPLIT_WORDS = r"""() => {
  const split = [];
  const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const words = [...node.data.matchAll(/\S+/g)].filter(t => /^\(?[A-Za-z]+(-[A-Za-z0-9]+)*[.,:;)?!]*$/.test(t[0]))
      .flatMap(t => [...t[0].matchAll(/[A-Za-z]{4,}/g)].map(m => ({ 0: m[0], index: t.index + m.index })));
    for (const m of words) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) split.push(m[0]);
    }
  }
  return [...new Set(split)];
}"""


def test_an_incident_and_a_rule_read_in_whole_words_on_a_phone(browser, phone_project):
    # The incident page's tables and a rule's heading once shrank to a letter or two a line at 360 px
    # ("W ar ni ng Li gh t", "vanishing-gradien t", "enable d"): a table scrolls in its own box instead.
    from alerts.models import Incident, Rule

    incident = Incident.objects.get(run__run_id=RUN)
    rule = Rule.objects.get(name="gradient-explosion")
    page = log_in(browser, phone_project, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 360, "height": 740})
    split = {}
    for name, path in (("incident", f"/incidents/{incident.pk}/"), ("rule", f"/rules/{rule.pk}/"), ("run", f"/runs/{RUN}/")):
        page.goto(phone_project.url + path)
        page.wait_for_load_state("load")
        assert overflow(page) <= 1, f"the {name} page scrolls sideways at 360 px"
        if words := page.evaluate(SPLIT_WORDS):
            split[name] = words
    assert split == {}, f"at 360 px these pages break words inside themselves: {split}"
