"""The runs the inbox page marks "needs review" (an incident that ended with nobody's word on it) are in the inbox
API's answer and in the live frames too, so a phone client or a live page sees what the page shows: members see
their project's, an outsider none, and a verdict takes the run off all three."""
import functools

import orjson
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from alerts import triage
from alerts.models import Alert
from ingest.contract import parse_json_batch
from ingest.service import ingest_batch
from opsconsole.asgi import application
from tests.factories import client_for, make_rule

TIMEOUT = 3


def spike(project, run_id="spiked"):
    """A loss spike that fires an ordinary rule and clears by itself, in one batch."""
    points = [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(40)]
    return ingest_batch(project, parse_json_batch(orjson.dumps({"run": {"id": run_id}, "points": points})))


@pytest.fixture
def loss_rule(project):
    return make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
                     persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})


@pytest.fixture
def spiked(loss_rule, project, sender):
    points = [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(40)]
    assert sender.post({"run": {"id": "spiked"}, "points": points}).status_code == 202
    assert sender.post({"run": {"id": "clean"}, "points": points[:20]}).status_code == 202
    return Alert.objects.select_related("rule", "run").get()


def inbox(user, **params):
    answer = client_for(user).get("/api/v1/inbox/", params)
    assert answer.status_code == 200, answer.content
    return answer.json()


@pytest.mark.django_db
def test_the_api_lists_what_the_page_marks_for_members_only(spiked, owner, teammate, outsider, other_project):
    page = client_for(owner).get("/inbox/").content.decode()
    assert "/runs/spiked/" in page.split('id="inbox-needs-review"')[1].split("</p>")[0]
    for member in (owner, teammate):
        body = inbox(member)
        assert body["results"] == [] and body["needs_review"] == ["spiked"]
    assert inbox(outsider)["needs_review"] == []
    assert inbox(owner, project=other_project.slug)["needs_review"] == []
    assert inbox(owner, run="clean")["needs_review"] == []
    assert inbox(owner, state="all")["needs_review"] == []  # as the page: the mark is the default view's

    triage.give_verdict(spiked, owner, "false_alarm", note="one bad batch")
    assert inbox(owner)["needs_review"] == []
    assert 'id="inbox-needs-review"' not in client_for(owner).get("/inbox/").content.decode()


def test_the_schema_documents_the_list(client):
    schema = client.get("/api/schema/?format=json").json()
    [name] = [n for n in schema["components"]["schemas"] if n.startswith("Paginated") and "Inbox" in n]
    assert "needs_review" in schema["components"]["schemas"][name]["required"]


def async_test(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return async_to_sync(fn)(*args, **kwargs)

    return wrapper


async def project_socket(user, slug):
    def cookie():
        client = client_for(user)
        return client.cookies[django_settings.SESSION_COOKIE_NAME].value

    value = await database_sync_to_async(cookie)()
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"),
               (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={value}".encode())]
    comm = WebsocketCommunicator(application, f"/ws/projects/{slug}/", headers=headers)
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected
    return comm


async def review_frames(comm):
    """The frames until the socket falls quiet, and the `review` ones among them."""
    seen = []
    while not await comm.receive_nothing(timeout=0.5):
        seen.append(await comm.receive_json_from(TIMEOUT))
    return seen, [f for f in seen if f["type"] == "review"]


@pytest.fixture
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db(transaction=True)
@async_test
async def test_the_live_frames_carry_the_list_and_the_runs_mark(memory_layer, loss_rule, project, owner):
    comm = await project_socket(owner, project.slug)
    await database_sync_to_async(spike)(project)
    seen, [frame] = await review_frames(comm)  # one per batch, however many alerts changed in it
    assert seen.index(frame) > max(i for i, f in enumerate(seen) if f["type"] == "alert")  # after what changed
    assert frame == {"type": "review", "run": "spiked", "needs_review": True, "health": "recovered",
                     "label": "Recovered", "runs": ["spiked"]}

    alert = await database_sync_to_async(lambda: Alert.objects.select_related("rule", "run").get())()
    await database_sync_to_async(triage.give_verdict)(alert, owner, "actionable")
    _, [frame] = await review_frames(comm)
    assert frame == {"type": "review", "run": "spiked", "needs_review": False, "health": "healthy",
                     "label": "Healthy", "runs": []}
    await comm.disconnect()
