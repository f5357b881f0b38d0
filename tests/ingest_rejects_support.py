"""Shared by tests/test_ingest_rejects_*.py: a run that already holds data, and the checks every rejection makes.

Each rejection test proves three things: the 4xx status, an error that names the
offending field's path exactly with a message a person can act on, and that
nothing of the request was stored (row counts, and the existing run's identity,
points and events read back through the API, are unchanged).
"""
from tests.conftest import stored_counts

RUN_ID = "reject-target"

# A batch the console accepts: the run every bad batch below tries to add to.
SEED_BATCH = {
    "batch_id": "seed-1",
    "run": {"id": RUN_ID, "name": "before any bad batch", "code_rev": "aaa111", "config": {"lr": 0.001}},
    "phases": [{"step": 0, "phase": "warmup"}],
    "points": [
        {"step": 0, "metric": "loss", "value": 3.0},
        {"step": 1, "metric": "loss", "value": 2.5},
        {"step": 2, "metric": "loss", "value": 2.25},
        {"step": 2, "metric": "grad_norm", "component": "layers.0", "value": 1.5},
    ],
    "events": [{"step": 2, "component": "node1", "condition": "stagnant", "magnitude": 0.5}],
}


def good_point(step, metric="loss", value=1.0, **extra):
    return {"step": step, "metric": metric, "value": value, **extra}


def good_event(step=3, **extra):
    return {"step": step, "component": "node1", "condition": "exploding", "magnitude": 9.0, **extra}


def batch(*points, run=None, **extra):
    """A batch for the seeded run; good points around the bad one show that good data is not kept either."""
    return {"run": {"id": RUN_ID} if run is None else run, "points": list(points), **extra}


def seed_run(sender):
    response = sender.post(SEED_BATCH)
    assert response.status_code == 202, response.content
    return snapshot(sender)


def snapshot(sender, run_id=RUN_ID):
    """Everything a rejected request could have touched, as the database and the API show it."""
    state = {"counts": stored_counts()}
    detail = sender.get(f"/api/v1/runs/{run_id}/")
    if detail.status_code == 404:
        state["run"] = None
        return state
    assert detail.status_code == 200, detail.content
    state["run"] = detail.json()
    for series in state["run"]["series"]:
        params = {"metric": series["metric"], "attempt": "all"}
        if series["component"]:
            params["component"] = series["component"]
        key = f"points {series['metric']} {series['component']}"
        state[key] = sender.get(f"/api/v1/runs/{run_id}/points/", **params).json()
    # The metrics bad batches send, even where the run holds none of them yet.
    for metric in ("loss", "grad_norm", "lr"):
        state[f"points {metric}"] = sender.get(f"/api/v1/runs/{run_id}/points/", metric=metric, attempt="all").json()
    state["events"] = sender.get(f"/api/v1/runs/{run_id}/events/").json()
    return state


def assert_nothing_stored(sender, before, run_id=RUN_ID):
    after = snapshot(sender, run_id)
    assert after["counts"] == before["counts"], "a rejected request changed stored rows"
    assert after == before, "a rejected request changed what the API reads back"


def errors_of(response, status):
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"errors"}, body
    errors = body["errors"]
    assert errors, "a rejection must say what is wrong"
    for error in errors:
        assert set(error) == {"path", "message"}, error
        assert isinstance(error["path"], str) and isinstance(error["message"], str), error
        assert error["message"].strip(), error
    return errors


def assert_rejected(response, status, path, *words):
    """The response is `status` with an error at exactly `path` whose message holds every one of `words`.

    Returns that error's message (and the full list is in the assertion text if it fails).
    """
    errors = errors_of(response, status)
    at_path = [e for e in errors if e["path"] == path]
    assert at_path, f"no error names the path {path!r}; errors were {errors}"
    message = at_path[0]["message"]
    for word in words:
        assert word.lower() in message.lower(), f"message for {path!r} does not mention {word!r}: {message!r}"
    return message


def ndjson(*lines):
    return ("\n".join(lines) + "\n").encode()
