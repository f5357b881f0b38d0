"""A mute covering an incident's origin holds its message; when the mute ends and the incident still fires, it goes out."""
from alerts import triage
from alerts.models import Alert, Mute
from notifications.models import Notification
from tests.notify_support import fire, make_channel, spike_rule


def test_a_muted_incident_is_held_and_sent_when_the_mute_ends(project, owner, sender, receiver, django_capture_on_commit_callbacks):
    spike_rule(project)
    channel = make_channel(project, url=receiver.url)
    fire(sender, run_id="run-a", high=("layers.1",))
    assert [b["run_id"] for b in receiver.bodies()] == ["run-a"]
    with django_capture_on_commit_callbacks(execute=True):
        triage.mute(Alert.objects.get(run__run_id="run-a"), owner, "rule", "noisy during the data migration", duration_minutes=60)

    fire(sender, run_id="run-b", high=("layers.1",))  # created muted: the rule is muted everywhere
    assert [b["run_id"] for b in receiver.bodies()] == ["run-a"]
    held = Notification.objects.get(channel=channel, incident__run__run_id="run-b")
    assert (held.event, held.state) == ("opened", "held")

    with django_capture_on_commit_callbacks(execute=True):
        triage.end_mute(Mute.objects.get(), owner)
    assert [b["run_id"] for b in receiver.bodies()] == ["run-a", "run-b"]
    held.refresh_from_db()
    assert held.state == "sent" and held.released_at is not None


def test_a_held_message_of_an_incident_that_ended_is_never_sent(project, owner, sender, receiver, django_capture_on_commit_callbacks):
    from tests.notify_support import calm

    spike_rule(project)
    make_channel(project, url=receiver.url)
    fire(sender, run_id="run-a", high=("layers.1",))
    with django_capture_on_commit_callbacks(execute=True):
        triage.mute(Alert.objects.get(run__run_id="run-a"), owner, "rule", "noisy during the data migration", duration_minutes=60)
    fire(sender, run_id="run-b", high=("layers.1",))
    calm(sender, run_id="run-b", after=100)
    with django_capture_on_commit_callbacks(execute=True):
        triage.end_mute(Mute.objects.get(), owner)
    assert [b["run_id"] for b in receiver.bodies()] == ["run-a"]


def test_a_muted_incident_is_not_pushed_to_alertmanager_again_until_the_mute_ends(project, owner, sender, receiver,
                                                                                   django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from notifications import tasks

    spike_rule(project)
    channel = make_channel(project, kind="alertmanager", url=receiver.url)
    fire(sender, run_id="run-a", high=("layers.1",))
    assert [r["path"] for r in receiver.requests] == ["/api/v2/alerts"]
    pushed = Notification.objects.get(channel=channel)
    stale = timezone.now() - timedelta(hours=1)  # past the refresh interval
    with django_capture_on_commit_callbacks(execute=True):
        triage.mute(Alert.objects.get(), owner, "component", "known: the data loader is being swapped", duration_minutes=60)
    Notification.objects.filter(pk=pushed.pk).update(sent_at=stale)
    tasks.sweep_now()
    assert len(receiver.requests) == 1  # left to lapse at its endsAt

    with django_capture_on_commit_callbacks(execute=True):
        triage.end_mute(Mute.objects.get(), owner)
    Notification.objects.filter(pk=pushed.pk).update(sent_at=stale)
    tasks.sweep_now()
    assert len(receiver.requests) == 2  # firing again: pushed again
