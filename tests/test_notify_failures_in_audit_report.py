"""Incident messages no try delivered are counted per channel in the rule audit report (page and JSON)."""
from tests.factories import client_for
from tests.notify_support import fire, make_channel, spike_rule


def test_the_report_counts_failed_notifications_per_channel(project, owner, sender, receiver):
    spike_rule(project)
    make_channel(project, name="broken-hook", url=receiver.url + "/broken")
    make_channel(project, name="good-hook", url=receiver.url + "/good")
    receiver.statuses = [410]  # channels are sent to in name order: broken-hook's message is refused for good
    fire(sender, run_id="run-a")
    assert [r["path"] for r in receiver.requests] == ["/broken", "/good"]

    client = client_for(owner)
    data = client.get("/api/v1/reports/rules/?project=pretrain").json()
    assert data["notification_failures"] == [{"channel": "broken-hook", "kind": "webhook", "failed": 1}]
    page = client.get("/reports/rules/?project=pretrain").content.decode()
    assert 'id="notification-failures"' in page and 'class="failed-count">1<' in page


def test_nothing_failed_nothing_shown(project, owner, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    fire(sender)
    client = client_for(owner)
    assert client.get("/api/v1/reports/rules/?project=pretrain").json()["notification_failures"] == []
    assert 'id="notification-failures"' not in client.get("/reports/rules/?project=pretrain").content.decode()
