"""In Chromium at 1366×768 (a laptop): the inbox never makes the page scroll sideways, and its actions stay reachable."""
import pytest

from tests.browser import log_in, screenshot
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]


@pytest.fixture
def busy_inbox(console_server, project, owner):
    """Alerts as a real project has them: long run ids, component names, conditions and owners."""
    grads = make_rule(project, name="nonfinite-gradients", kind="nonfinite")
    spike = make_rule(project, name="gradient-explosion", kind="threshold", scope={"metrics": ["grad_norm"]}, response="review")
    for i in range(6):
        make_alert(grads, f"pretrain-llama-3-8b-ablation-seq8192-lr3e-4-warmup2000-seed{i}",
                   f"model.layers.{i}.self_attn.q_proj.lora_A.default", first_step=123456 + i)
        make_alert(spike, f"pretrain-llama-3-8b-ablation-seq8192-lr3e-4-warmup2000-seed{i}", "", magnitude=1234.5678)
    return console_server


def test_the_inbox_fits_a_laptop_screen(browser, busy_inbox):
    page = log_in(browser, busy_inbox, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(busy_inbox.url + "/inbox/")
    page.wait_for_selector("#inbox-table")
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls {overflow}px sideways"
    # Every row's actions can be reached: inside the viewport, or in the table's own scroll area.
    button = page.locator("#inbox-table button[data-action=acknowledge]").first
    button.scroll_into_view_if_needed()
    assert button.is_visible()
    box = button.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 1366
    screenshot(page, "inbox-laptop")


def test_on_a_narrower_screen_the_table_scrolls_in_its_own_box(browser, busy_inbox):
    page = log_in(browser, busy_inbox, "olivia", "pw-olivia")
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(busy_inbox.url + "/inbox/")
    page.wait_for_selector("#inbox-table")
    assert page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    box = page.evaluate("() => { const b = document.getElementById('inbox-live'); return [b.scrollWidth, b.clientWidth] }")
    assert box[0] > box[1]  # the table's own horizontal scroll
