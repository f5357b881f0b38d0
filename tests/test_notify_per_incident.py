"""Channels hear of incidents, not alerts: one message when it opens, rate-limited updates as it grows, one when it ends."""
from notifications.models import Notification
from tests.notify_support import calm, fire, grad_points, make_channel, post_points, spike_rule


def events(receiver):
    return [(b["event"], b["alerts"]) for b in receiver.bodies()]


def test_one_message_for_an_incident_of_many_alerts_and_one_when_it_ends(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)

    fire(sender, step=100, high=("layers.0", "layers.1", "layers.2"))  # three alerts at one step
    assert events(receiver) == [("opened", 3)]

    calm(sender, after=100, points=3)  # every alert's condition clears: the incident resolves
    assert events(receiver) == [("opened", 3), ("resolved", 3)]
    resolved = receiver.bodies()[1]
    assert resolved["resolved_at"] is not None and resolved["summary"].startswith("Resolved")


def test_updates_are_rate_limited_per_incident(project, sender, receiver, settings):
    settings.NOTIFY_REPEAT_MINUTES = 30
    spike_rule(project)
    channel = make_channel(project, url=receiver.url)

    fire(sender, step=100, high=("layers.1",))
    post_points(sender, "run-n", grad_points(102, high=("layers.0", "layers.1")))  # another component joins
    assert events(receiver) == [("opened", 1)]  # the update came within the window: recorded, not sent
    assert list(Notification.objects.filter(channel=channel).values_list("event", "state").order_by("id")) == [
        ("opened", "sent"), ("updated", "rate_limited")]


def test_updates_go_out_when_the_window_allows(project, sender, receiver, settings):
    settings.NOTIFY_REPEAT_MINUTES = 0
    spike_rule(project)
    make_channel(project, url=receiver.url)

    fire(sender, step=100, high=("layers.1",))
    post_points(sender, "run-n", grad_points(102, high=("layers.0", "layers.1")))
    assert events(receiver) == [("opened", 1), ("updated", 2)]


def test_every_enabled_channel_of_the_project_hears_it_and_no_other(project, other_project, sender, receiver):
    spike_rule(project)
    make_channel(project, name="first", url=receiver.url + "/first")
    make_channel(project, name="off", url=receiver.url + "/off", enabled=False)
    make_channel(other_project, name="elsewhere", url=receiver.url + "/elsewhere")

    fire(sender)
    assert [r["path"] for r in receiver.requests] == ["/first"]
