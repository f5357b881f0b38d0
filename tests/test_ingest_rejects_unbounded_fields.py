"""Every field of a batch is bounded, generously for real senders, and a field over its bound is a 400 naming it.

Taken before: a 3,000,000-character tag key, 200,000 tags, a `time` of 1e300,
`1e400` as Infinity while `10**400` was refused. The bounds (docs/api.md): at most
256 tags with names of at most 128 characters, `config` at most 256 KiB as JSON,
times from 0 to 7258118400 (2200-01-01), at most 10,000 phases, `budget.steps`
within the step range; and one rule for numbers beyond the 64-bit float range:
refused wherever they appear, whether written 1e400 or as a 400-digit integer.
A non-finite value written "NaN" / "Infinity" (or Python's bare tokens) is data.
"""
import pytest

from ingest.contract import MAX_CONFIG_BYTES, MAX_PHASES, MAX_TAG_KEY, MAX_TAGS, MAX_TIME
from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, batch, good_event, good_point, ndjson, seed_run

pytestmark = pytest.mark.django_db

HUGE_INT = "1" + "0" * 400


def run(**fields):
    return {"id": RUN_ID, **fields}


def test_a_three_million_character_tag_key_is_refused(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run=run(tags={"k" * 3_000_000: "v"})))
    message = assert_rejected(response, 400, "run.tags." + "k" * 64 + "…", "at most 128 characters", "3000000")
    assert len(response.content) < 2000, "the error must not echo the key"
    assert len(message) < 200
    assert_nothing_stored(sender, before)


def test_two_hundred_thousand_tags_are_refused(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run=run(tags={f"t{i}": "v" for i in range(200_000)})))
    assert_rejected(response, 400, "run.tags", f"at most {MAX_TAGS} tags", "200000")
    assert_nothing_stored(sender, before)


def test_tags_at_their_bounds_are_kept(sender):
    tags = {f"{i:0{MAX_TAG_KEY}d}": "v" * 256 for i in range(MAX_TAGS)}
    assert sender.post({"run": {"id": "tagged", "tags": tags}}).status_code == 202
    assert sender.get("/api/v1/runs/tagged/").json()["tags"] == tags


def test_a_config_over_256_kib_is_refused_and_one_at_the_limit_kept(sender):
    before = seed_run(sender)
    # {"blob":"…"} is 11 bytes of JSON around the string.
    response = sender.post(batch(good_point(3), run=run(config={"blob": "x" * (MAX_CONFIG_BYTES - 10)})))
    assert_rejected(response, 400, "run.config", "at most 262144 bytes")
    assert_nothing_stored(sender, before)
    assert sender.post({"run": {"id": "big-config", "config": {"blob": "x" * (MAX_CONFIG_BYTES - 12)}}}).status_code == 202


@pytest.mark.parametrize("when", [1e300, MAX_TIME + 1, 10**15, -1])
def test_a_time_outside_0_to_2200_is_refused_naming_the_field(sender, when):
    before = seed_run(sender)
    assert_rejected(sender.post(batch(good_point(3, time=when))), 400, "points[0].time", "Unix seconds", str(MAX_TIME))
    assert_rejected(sender.post(batch(phases=[{"step": 3, "phase": "eval", "time": when}])), 400, "phases[0].time", "2200")
    assert_rejected(sender.post(batch(events=[good_event(time=when)])), 400, "events[0].time", "2200")
    body = ndjson('{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1, "time": %r}' % (RUN_ID, when))
    assert_rejected(sender.post(body, content_type="application/x-ndjson"), 400, "lines[1].time", "2200")
    assert_nothing_stored(sender, before)


def test_times_at_the_bounds_are_kept(sender):
    points = [good_point(1, time=0), good_point(2, time=MAX_TIME), good_point(3, time=float(MAX_TIME))]
    assert sender.post({"run": {"id": "timed"}, "points": points}).status_code == 202


@pytest.mark.parametrize("literal", ["1e400", "-1e400", HUGE_INT, "-" + HUGE_INT])
@pytest.mark.parametrize("field, path, words", [
    ('"points": [{"step": 3, "metric": "loss", "value": %s}]', "points[0].value", "too large for a 64-bit float"),
    ('"points": [{"step": 3, "metric": "loss", "value": 1, "time": %s}]', "points[0].time", "Unix seconds"),
    ('"events": [{"step": 3, "component": "gpu0", "condition": "dead", "magnitude": %s}]', "events[0].magnitude",
     "too large for a 64-bit float"),
    ('"events": [{"step": 3, "component": "gpu0", "condition": "dead", "magnitude": 1, "detail": {"peak": %s}}]',
     "events[0].detail.peak", "too large for a 64-bit float"),
    ('"run": {"id": "%s", "config": {"lr": [%%s]}}' % RUN_ID, "run.config.lr[0]", "too large for a 64-bit float"),
    ('"run": {"id": "%s", "budget": {"gpu_hours": %%s}}' % RUN_ID, "run.budget.gpu_hours", "a number > 0"),
])
def test_a_number_beyond_the_float_range_is_refused_however_it_is_written(sender, literal, field, path, words):
    before = seed_run(sender)
    body = "{" + ('"run": {"id": "%s"}, ' % RUN_ID if not field.startswith('"run"') else "") + field % literal + "}"
    assert_rejected(sender.post(body), 400, path, words)
    assert_nothing_stored(sender, before)


def test_value_1e400_says_how_to_send_a_non_finite_value(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1e400}]}' % RUN_ID
    assert_rejected(sender.post(body), 400, "points[0].value", "too large for a 64-bit float", '"Infinity"')
    assert_nothing_stored(sender, before)


def test_non_finite_values_written_as_the_contract_says_stay_data(sender):
    body = ('{"run": {"id": "nonfinite", "config": {"inf": Infinity}}, "points": [{"step": 1, "metric": "loss", "value": "Infinity"},'
            ' {"step": 2, "metric": "loss", "value": -Infinity}, {"step": 3, "metric": "loss", "value": NaN},'
            ' {"step": 4, "metric": "loss", "value": 1.7976931348623157e308}]}')
    assert sender.post(body).status_code == 202
    values = [p["value"] for p in sender.get("/api/v1/runs/nonfinite/points/", metric="loss").json()["points"]]
    assert values == ["Infinity", "-Infinity", "NaN", 1.7976931348623157e308]
    assert sender.get("/api/v1/runs/nonfinite/").json()["config"] == {"inf": "Infinity"}


def test_more_than_10000_phases_are_a_413(sender):
    before = seed_run(sender)
    phases = [{"step": i, "phase": "steady"} for i in range(MAX_PHASES + 1)]
    assert_rejected(sender.post(batch(phases=phases)), 413, "", f"{MAX_PHASES + 1} phases", "split the batch")
    lines = ['{"type": "phase", "run": "%s", "step": %d, "phase": "steady"}' % (RUN_ID, i) for i in range(MAX_PHASES + 1)]
    assert_rejected(sender.post(ndjson(*lines), content_type="application/x-ndjson"), 413, "", f"{MAX_PHASES + 1} phases")
    assert_nothing_stored(sender, before)


def test_a_budget_beyond_the_step_range_is_refused(sender):
    before = seed_run(sender)
    assert_rejected(sender.post(batch(run=run(budget={"steps": 2**53}))), 400, "run.budget.steps", "9007199254740991")
    assert_nothing_stored(sender, before)


def test_a_bad_batch_id_header_is_refused(sender):
    before = seed_run(sender)
    line = ndjson('{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1}' % RUN_ID)
    response = sender.post(line, content_type="application/x-ndjson", headers={"X-Batch-Id": "a\x00b"})
    assert_rejected(response, 400, "X-Batch-Id", "NUL")
    assert_nothing_stored(sender, before)
