"""Run ids are unique across the console: a token of another project may not write to a run it does not own (403)."""
import pytest

from tests.ingest_rejects_support import (
    RUN_ID,
    SEED_BATCH,
    assert_nothing_stored,
    assert_rejected,
    batch,
    good_event,
    good_point,
    ndjson,
    seed_run,
)

pytestmark = pytest.mark.django_db


def test_other_projects_token_writing_to_an_existing_run_is_403(sender, other_token):
    before = seed_run(sender)
    intrusion = batch(
        good_point(3),
        good_point(4, metric="grad_norm", component="layers.0", value="NaN"),
        run={"id": RUN_ID, "name": "taken over", "code_rev": "bbb222", "config": {"lr": 1.0}},
        phases=[{"step": 3, "phase": "restart"}],
        events=[good_event(step=3)],
    )
    response = sender.post(intrusion, token=other_token)
    assert_rejected(response, 403, "run.id", "belongs to another project", "may not write")
    # The run gains nothing: no points, events, phases, receipt, identity change, attempt, or new name.
    assert_nothing_stored(sender, before)
    assert sender.get(f"/api/v1/runs/{RUN_ID}/").json()["name"] == SEED_BATCH["run"]["name"]


def test_other_projects_token_resending_the_owners_batch_id_is_403_not_a_duplicate(sender, other_token):
    # The ownership check comes before the duplicate check: a 200 "duplicate" would leak that the batch exists.
    before = seed_run(sender)
    response = sender.post({**SEED_BATCH, "points": [good_point(3)]}, token=other_token)
    assert_rejected(response, 403, "run.id", "belongs to another project")
    assert_nothing_stored(sender, before)


def test_other_projects_token_writing_ndjson_to_an_existing_run_is_403(sender, other_token):
    before = seed_run(sender)
    body = ndjson(
        '{"type": "run", "id": "%s", "name": "taken over"}' % RUN_ID,
        '{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 0.0}' % RUN_ID,
    )
    response = sender.post(body, content_type="application/x-ndjson", token=other_token)
    assert_rejected(response, 403, "run.id", "belongs to another project")
    assert_nothing_stored(sender, before)


def test_other_project_cannot_read_the_run_either(sender, other_token):
    # The 403 above must not be a way around reading: the other project's token does not see the run.
    seed_run(sender)
    response = sender.client.get(f"/api/v1/runs/{RUN_ID}/points/", {"metric": "loss"}, HTTP_AUTHORIZATION=f"Bearer {other_token}")
    assert response.status_code == 404
