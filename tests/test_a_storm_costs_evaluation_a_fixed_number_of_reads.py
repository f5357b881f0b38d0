"""A batch that opens many incidents, or fires many alerts, reads the mutes and its incidents' live frames, writes
its alerts, changes and incidents, and asks for notification channels a fixed number of times: a query per alert
or per incident made a storm cost evaluation more the worse it was."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts import triage
from alerts.models import Alert, AlertChange, Incident, IncidentChange, MuteScope
from notifications.models import Channel
from opsconsole import live
from tests.incident_support import healthy, send, starter_project

pytestmark = pytest.mark.django_db

COMPONENTS = [f"layers.{i}" for i in range(4)]


def nan_losses(start, steps, end=None):
    """The run from `start` on, healthy but for a NaN loss at each of `steps`: far enough apart (more than the
    incident window and the 10 clear points that resolve each alert) to be an alert and an incident each."""
    points = healthy(range(start, end or steps[-1] + 20), components=COMPONENTS)
    for point in points:
        if point["metric"] == "loss" and point["step"] in steps:
            point["value"] = "NaN"
    return points


def reads(sender, run_id, points, sent):
    """The batch's queries of mutes and of incidents (rows, not writes), and the frames it published."""
    with CaptureQueriesContext(connection) as queries:
        send(sender, run_id, points)
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    return (sum('FROM "alerts_mute"' in sql for sql in selects),
            sum('FROM "alerts_incident"' in sql for sql in selects),
            [frame for message in sent for frame in message["frames"] if frame["type"] == "incident"])


@pytest.fixture
def sent(monkeypatch):
    """Every live message evaluation sends, as sent."""
    messages = []
    monkeypatch.setattr(live, "_deliver", lambda layer, batch: messages.extend(batch))
    return messages


def test_incident_frames_and_mutes_are_read_once_however_many_incidents_a_batch_opens(sender, project, sent):
    starter_project(project)
    send(sender, "few", healthy(range(0, 150), components=COMPONENTS))
    send(sender, "many", healthy(range(0, 150), components=COMPONENTS))

    few = reads(sender, "few", nan_losses(150, [200, 250]), sent)
    sent.clear()
    many = reads(sender, "many", nan_losses(150, [200, 250, 300, 350, 400, 450, 500, 550]), sent)

    assert Incident.objects.filter(run__run_id="few").count() == 2
    assert Incident.objects.filter(run__run_id="many").count() == 8
    assert many[:2] == few[:2], "mutes and incidents are read the same number of times for 8 incidents as for 2"
    assert few[0] <= 1
    frames = many[2]
    # Each frame is its incident as the API shows it, after the batch: opened with its NaN loss, resolved after it.
    assert sorted(f["incident"]["first_step"] for f in frames) == [200, 250, 300, 350, 400, 450, 500, 550]
    for frame in frames:
        incident = Incident.objects.get(pk=frame["incident"]["id"])
        assert frame["incident"]["alerts"] == list(Alert.objects.filter(incident=incident).order_by("pk").values_list("pk", flat=True))
        assert frame["incident"]["state"] == incident.state
        assert frame["incident"]["origin"]["rule"] == "nonfinite-loss"


def test_a_mute_still_covers_the_alerts_a_batch_fires_under_it(sender, project, owner, sent):
    starter_project(project)
    send(sender, "muted", healthy(range(0, 150), components=COMPONENTS))
    send(sender, "muted", nan_losses(150, [200], end=205))  # its alert still open: 10 clear points resolve it
    first = Alert.objects.select_related("rule", "run").get(run__run_id="muted")
    triage.mute(first, owner, MuteScope.RUN, "a known loss-scaling bug", duration_minutes=60)

    send(sender, "muted", nan_losses(205, [300, 350, 400]))

    later = Alert.objects.filter(run__run_id="muted").exclude(pk=first.pk).order_by("first_step")
    # Each born muted, then resolved by the clear points after its NaN.
    assert [(a.first_step, list(a.changes.order_by("pk").values_list("kind", flat=True))) for a in later] == [
        (step, ["fired", "muted", "resolved"]) for step in (300, 350, 400)]


WRITTEN = ("alerts_alert", "alerts_alertchange", "alerts_incident", "alerts_incidentchange")


def writes(sender, run_id, points):
    """The batch's statements that write alerts, their changes, incidents and theirs, and its checks for a channel."""
    with CaptureQueriesContext(connection) as queries:
        send(sender, run_id, points)
    counts = dict.fromkeys(WRITTEN, 0)
    channels = 0
    for query in queries.captured_queries:
        sql = query["sql"].lstrip()
        head = sql.split("(")[0] if sql.upper().startswith("INSERT") else sql[:80]
        if sql.upper().startswith(("INSERT", "UPDATE")):
            for table in WRITTEN:
                if f'"{table}"' in head.split(" SET ")[0]:
                    counts[table] += 1
        # Whether the project has a channel, asked in the evaluation (routing each incident after it is not this).
        channels += sql.upper().startswith("SELECT") and 'AS "a" FROM "notifications_channel"' in sql
    return counts, channels


def test_the_alerts_and_incidents_a_batch_fires_are_written_in_a_fixed_number_of_statements(sender, project):
    starter_project(project)
    Channel.objects.create(project=project, name="pager", kind="webhook", url="https://pager.example.org/hook")
    send(sender, "few", healthy(range(0, 150), components=COMPONENTS))
    send(sender, "many", healthy(range(0, 150), components=COMPONENTS))

    few = writes(sender, "few", nan_losses(150, [200, 250]))
    many = writes(sender, "many", nan_losses(150, [200, 250, 300, 350, 400, 450, 500, 550]))

    assert many == few, "8 alerts and incidents are written with as many statements as 2"
    assert few[1] <= 1
    # What was written: each NaN loss an alert, fired and resolved in the batch, and an incident opened on it.
    alerts = Alert.objects.filter(run__run_id="many").order_by("pk")
    assert [(a.first_step, a.state, list(a.changes.order_by("pk").values_list("kind", flat=True))) for a in alerts] == [
        (step, "resolved", ["fired", "resolved"]) for step in (200, 250, 300, 350, 400, 450, 500, 550)]
    for alert in alerts:
        assert alert.incident.origin_id == alert.pk
        assert list(IncidentChange.objects.filter(incident=alert.incident).values_list("kind", "alert_id")) == [
            ("opened", alert.pk)]
    assert AlertChange.objects.filter(alert__run__run_id="many", receipt__isnull=True).count() == 0
