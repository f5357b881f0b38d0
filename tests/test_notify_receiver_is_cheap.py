"""What notifications add to evaluation's transaction: one query, no network, and nothing raised into it."""
from unittest import mock

from django.db import transaction
from django.utils import timezone

from alerts.models import Incident
from notifications import tasks
from tests.notify_support import fire, make_channel, spike_rule


def test_the_receiver_reads_one_row_and_leaves_the_rest_for_after_commit(project, sender, receiver, django_assert_num_queries,
                                                                           django_capture_on_commit_callbacks):
    spike_rule(project)
    fire(sender)  # an incident, with no channel yet
    make_channel(project, url=receiver.url)
    incident = Incident.objects.select_related("run").get()
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic(), django_assert_num_queries(1):
        tasks.incident_changed(Incident, incident=incident, kinds=["joined"], now=timezone.now())
    assert receiver.requests == [] and len(callbacks) == 1  # sent only once the change is committed


def test_a_routing_error_never_reaches_ingest(project, sender, receiver):
    spike_rule(project)
    make_channel(project, url=receiver.url)
    with mock.patch("notifications.routing.route", side_effect=RuntimeError("a bug in routing")):
        fire(sender)  # answered 202 all the same
    assert receiver.requests == []
