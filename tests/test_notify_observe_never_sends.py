"""A rule allowed only to `observe` never sends, however many incidents it opens; `review` sends like `notify`."""
from notifications.models import Notification
from tests.notify_support import fire, make_channel, spike_rule


def test_observe_rules_send_nothing(project, sender, receiver):
    spike_rule(project, response="observe")
    make_channel(project, url=receiver.url)
    fire(sender)
    assert receiver.requests == []
    assert not Notification.objects.exists()


def test_review_rules_send_per_incident(project, sender, receiver):
    spike_rule(project, response="review")
    make_channel(project, url=receiver.url)
    fire(sender)
    [body] = receiver.bodies()
    assert body["severity"] == "review"
