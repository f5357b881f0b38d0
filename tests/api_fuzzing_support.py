"""Schemathesis against `/api/schema/`, every check on: no server error, and the schema tells the truth.

Every operation of the API is called over HTTP on Django's live test server (the
real application) on the test database (PostgreSQL in CI), with generated valid and
invalid requests (Schemathesis' examples, coverage and fuzzing phases), once
authenticated with a project token and once with a personal token of a rule
admin. All of Schemathesis' checks run on every answer: no 5xx; the status,
content type, headers and body as documented; schema-valid data accepted and
invalid data refused; requests without or with wrong credentials refused; the
Allow header on 405s. Examples per operation are bounded (`MAX_EXAMPLES`) so
the suite stays fast. One test file per token (test_api_fuzzing_*_token.py), so that parallel test processes
(bin/test) run the two at once.
"""
import orjson
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES as NEGATIVE_STATUSES
from schemathesis.config._checks import POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES as POSITIVE_STATUSES
from schemathesis.engine import events, from_schema

from alerts import triage
from alerts.incidents import group_new_alerts
from ingest.contract import CONDITIONS
from ingest.models import Run
from opsconsole.models import PersonalToken
from tests.factories import make_alert, make_rule
from tests.notify_support import make_channel

MAX_EXAMPLES = 25
RUN_IDS = ["fuzz-run", "fuzz/run.2", "other-project-run"]


@st.composite
def ndjson_bodies(draw):
    """A valid NDJSON request: one run's lines (the schema can only say "a string")."""
    run = draw(st.sampled_from(RUN_IDS[:2]))
    step = st.integers(0, 10_000)
    value = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64), st.sampled_from(["NaN", "Infinity", "-Infinity"]))
    line = st.one_of(
        st.fixed_dictionaries({"type": st.just("point"), "run": st.just(run), "step": step,
                               "metric": st.sampled_from(["loss", "grad_norm", "val/loss"]), "value": value}),
        st.fixed_dictionaries({"type": st.just("phase"), "run": st.just(run), "step": step,
                               "phase": st.sampled_from(["warmup", "steady", "eval"])}),
        st.fixed_dictionaries({"type": st.just("event"), "run": st.just(run), "step": step, "component": st.just("gpu0"),
                               "condition": st.sampled_from(CONDITIONS), "magnitude": st.floats(-1e6, 1e6)}),
    )
    lines = draw(st.lists(line, min_size=1, max_size=20))
    return b"".join(orjson.dumps(item) + b"\n" for item in lines)


schemathesis.openapi.media_type("application/x-ndjson", ndjson_bodies())


@pytest.fixture
def seeded(project, other_project, token, other_token, owner, sender):
    """A project with runs, points, events, rules and alerts for the fuzzer to find; another project's run beside it."""
    points = [{"step": s, "metric": "loss", "value": 2.0 - s / 100} for s in range(20)]
    events = [{"step": 5, "component": "gpu0", "condition": "dead", "magnitude": 1.0}]
    assert sender.post({"run": {"id": "fuzz-run", "tags": {"team": "a"}}, "points": points, "events": events}).status_code == 202
    assert sender.post({"run": {"id": "other-project-run"}, "points": points}, token=other_token).status_code == 202
    rule = make_rule(project, kind="nonfinite")
    alerts = [make_alert(rule, run="fuzz-run", component=f"layers.{state}", state=state)
              for state in ("firing", "acknowledged", "resolved")]
    triage.mute(alerts[0], owner, "component", "for the mute operations to find", duration_minutes=60)
    group_new_alerts(Run.objects.get(run_id="fuzz-run"))  # an incident for the incident operations to find
    # A channel for the channel operations to find; its URL answers nothing (refused at once), so a test message fails fast.
    make_channel(project, name="fuzz-hook", url="http://127.0.0.1:9/hook", secret="fuzz-secret")
    return {"project": token, "personal": PersonalToken.issue(owner)[1]}


# Valid-looking requests that state decides, which no JSON Schema can say (each operation's description
# says it): for rules, `stop`/`rewind` only on hard-invariant kinds, unique names per project, each kind's
# params; for acting on an alert or an incident, its state (a resolved one cannot be acknowledged or muted) and a
# mute's window (in the future, at most 7 days ahead). Those answer 400 naming the field.
DECIDED_BY_STATE = ("rules_create", "rules_update", "rules_partial_update", "alerts_acknowledge", "alerts_mute",
                    "alerts_new_normal",  # only an open alert of a band rule has a level to accept
                    "incidents_acknowledge", "incidents_mute",
                    # mutes: only an active one can be ended or extended, and past the project's limit only by
                    # a rule admin.
                    "mutes_end", "mutes_extend",
                    # a backtest: a saved rule by id or a draft's fields (validated as rules_create validates them),
                    # run ids of the rule's project, at most 200 runs matching.
                    "rules_backtest",
                    # reviews: decided once, compared with another run than its own, a next review after the run's
                    # newest step, a correction of an entry that exists (a schedule's steps or hours, a non-empty
                    # project, a backtest's body and NUL in query strings are in the schema itself).
                    "reviews_check_step", "reviews_compare", "reviews_decide", "decisions_create",
                    # channels: unique names per project, each kind's URL and config (notifications/channels.py).
                    "channels_create", "channels_partial_update")
STATE_400 = {"checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE_STATUSES, "400"]}}}


def run_schemathesis(url, token):
    """Every phase and check of `schemathesis run --checks all` against the server at `url`; the failures and errors found."""
    config = schemathesis.Config.from_dict({
        "headers": {"Authorization": f"Bearer {token}"},
        "workers": 1,
        # NUL is refused everywhere (tests/test_nul_character_is_a_4xx.py) but OpenAPI 3.0 cannot say so of
        # the keys of free-form objects (config, detail): generated data holds none.
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none", "allow-x00": False},
        "checks": {
            "enabled": True,
            # A body over a documented limit (10,000 items, 4 MiB) is refused with 413, the status for it.
            "negative_data_rejection": {"expected-statuses": [*NEGATIVE_STATUSES, "413"]},
        },
        "phases": {"stateful": {"enabled": False}},
        "suppress-health-check": ["all"],
        "operations": [{"include-operation-id": op, **STATE_400} for op in DECIDED_BY_STATE],
    })
    schema = schemathesis.openapi.from_url(f"{url}/api/schema/?format=json", config=config)
    problems = []
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        sample = check.failure_info.code_sample
                        interaction = event.recorder.interactions.get(case_id)
                        answer = interaction.response.content[:500] if interaction and interaction.response else b""
                        problems.append(f"{event.recorder.label}: {failure.title}\n{failure.message}\n{sample[:2000]}\n"
                                        f"answer: {answer!r}")
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            problems.append(f"{getattr(event, 'label', '')}: error {getattr(event, 'value', getattr(event, 'exception', None))!r}")
    return sorted(set(problems))


def assert_every_operation_answers_as_documented(live_server, token, settings):
    # The fuzzer sends wrong credentials on purpose; throttled, every later request would be a 429
    # and nothing else would be checked. The 429 itself is documented and tested on its own.
    settings.TOKEN_FAILURES_PER_ADDRESS = settings.TOKEN_FAILURES_PER_TOKEN = 1_000_000
    problems = run_schemathesis(live_server.url, token)
    assert not problems, f"{len(problems)} problems:\n\n" + "\n\n".join(problems)
