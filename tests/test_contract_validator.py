"""Pure unit tests of ingest/contract.py (no database): it must agree with the contract's JSON Schema.

The schema is a copy of the contract's own `ingest-v1.schema.json` (tests/data/; the
project never reads the shared spec folder at run time, and contract v1 is fixed, so
the copy is pinned by its hash). Where `jsonschema` is importable (drf-spectacular
depends on it), every batch below, and a few hundred seeded random mutations of the
contract's example batch, get the same verdict from both, and the contract's error
paths sit where the schema's errors are. Without `jsonschema` those tests skip and
the expected verdicts and paths written here still run.

The contract is deliberately stricter than the schema can say in a few places, each
tested on its own below rather than in the agreement set: non-finite steps, times and
magnitudes (not JSON numbers at all), an event `detail` over 4 KiB (the spec's limit),
integers beyond the float range in time/magnitude/gpu_hours, times after 2200, size and
count bounds on config, detail and tags, nesting deeper than 64 levels, the NUL character and
unpaired surrogates (no database stores them), `budget.deadline` without a zone, and
a trailing newline after a name (ECMA-262 `$`, which the schema means, does not match
before it; Python's `re`, which the `jsonschema` package uses, does).
"""
import copy
import hashlib
import json
import math
import random
from pathlib import Path

import pytest

from ingest.contract import (
    MAX_ITEMS,
    MAX_STEP,
    MAX_TAG_KEY,
    MAX_TAGS,
    MAX_TIME,
    ContractError,
    TooLarge,
    layer_for_metric,
    parse_json_batch,
    parse_ndjson,
)

from tests.test_contract_examples_roundtrip import CONTRACT_BATCH

SCHEMA_PATH = Path(__file__).parent / "data" / "ingest-v1.schema.json"
# sha256 of /work/shared/spec/ingest-v1.schema.json when it was copied; v1 never changes.
SCHEMA_SHA256 = "773fb3707780f099474346fa797df02646f5a95839877a876d8c2f4d3b6196a3"

EXAMPLE = CONTRACT_BATCH  # the contract's own example batch


def with_(path, value, base=EXAMPLE):
    """A deep copy of `base` with the field at `path` (a tuple of keys/indices) set, or removed if value is DELETE."""
    batch = copy.deepcopy(base)
    *parents, last = path
    target = batch
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return batch


DELETE = object()
P0 = ("points", 0)
E0 = ("events", 0)

VALID = {
    "contract example": EXAMPLE,
    "run id only": {"run": {"id": "r"}},
    "empty arrays": {"run": {"id": "r"}, "phases": [], "points": [], "events": []},
    "run id with every allowed character": {"run": {"id": "Az09._:/-"}},
    "run id of 128 characters": {"run": {"id": "r" * 128}},
    "metric of 128 characters": with_(P0 + ("metric",), "m" * 128),
    "component of 256 characters": with_(P0 + ("component",), "c" * 256),
    "component with brackets": with_(P0 + ("component",), "layers[3].attn:q"),
    "run name of 256 characters": with_(("run", "name"), "n" * 256),
    "step 0": with_(P0 + ("step",), 0),
    "step 2**53 - 1": with_(P0 + ("step",), 2**53 - 1),
    "step written as 7.0": with_(P0 + ("step",), 7.0),
    "value Infinity string": with_(P0 + ("value",), "Infinity"),
    "value -Infinity string": with_(P0 + ("value",), "-Infinity"),
    "value negative zero": with_(P0 + ("value",), -0.0),
    "value integer": with_(P0 + ("value",), 3),
    "value largest double": with_(P0 + ("value",), 1.7976931348623157e308),
    "time 0": with_(P0 + ("time",), 0),
    "every layer": {"run": {"id": "r"}, "points": [{"step": 1, "metric": "m", "value": 1, "layer": layer} for layer in
                                                   ("system", "data", "numerics", "optimization", "generalization")]},
    "every condition": {"run": {"id": "r"}, "events": [{"step": 1, "component": "c", "condition": c, "magnitude": 0} for c in
                                                       ("dead", "oscillating", "saturated", "stagnant", "exploding",
                                                        "low_confidence", "lost_gradient", "unclassified")]},
    "phase outside the vocabulary": with_(("phases", 0, "phase"), "my-own-phase"),
    "event with detail and time": with_(E0 + ("detail",), {"window": [1, 2, 3], "note": "x"}, with_(E0 + ("time",), 5.5)),
    "budget with a zoned deadline": with_(("run", "budget", "deadline"), "2026-12-01T00:00:00Z"),
    "budget steps written as 100000.0": with_(("run", "budget", "steps"), 100000.0),
    "empty config and tags": with_(("run", "config"), {}, with_(("run", "tags"), {})),
    "batch_id of 128 characters": with_(("batch_id",), "b" * 128),
    "no batch_id": with_(("batch_id",), DELETE),
}

# name -> (batch, the contract's error paths, exactly)
INVALID = {
    "no run": ({"points": []}, {"run"}),
    "run is a string": ({"run": "r"}, {"run"}),
    "run without id": ({"run": {"name": "x"}}, {"run.id"}),
    "run id empty": ({"run": {"id": ""}}, {"run.id"}),
    "run id of 129 characters": ({"run": {"id": "r" * 129}}, {"run.id"}),
    "run id with a space": ({"run": {"id": "a b"}}, {"run.id"}),
    "run id a number": ({"run": {"id": 7}}, {"run.id"}),
    "unknown top-level field": (with_(("extra",), 1), {"extra"}),
    "unknown run field": (with_(("run", "owner"), "x"), {"run.owner"}),
    "unknown point field": (with_(P0 + ("unit",), "nats"), {"points[0].unit"}),
    "unknown event field": (with_(E0 + ("severity",), "high"), {"events[0].severity"}),
    "unknown phase field": (with_(("phases", 1, "until"), 5), {"phases[1].until"}),
    "unknown budget field": (with_(("run", "budget", "tokens"), 5), {"run.budget.tokens"}),
    "points an object": (with_(("points",), {}), {"points"}),
    "events a string": (with_(("events",), "x"), {"events"}),
    "phases null": (with_(("phases",), None), {"phases"}),
    "a point that is an array": (with_(P0, [1, "loss", 2.0]), {"points[0]"}),
    "step negative": (with_(P0 + ("step",), -1), {"points[0].step"}),
    "step fractional": (with_(P0 + ("step",), 1.5), {"points[0].step"}),
    "step string NaN": (with_(P0 + ("step",), "NaN"), {"points[0].step"}),
    "step numeric string": (with_(P0 + ("step",), "3"), {"points[0].step"}),
    "step boolean": (with_(P0 + ("step",), True), {"points[0].step"}),
    "step 2**53": (with_(P0 + ("step",), 2**53), {"points[0].step"}),
    "step missing": (with_(P0 + ("step",), DELETE), {"points[0].step"}),
    "metric a number": (with_(P0 + ("metric",), 7), {"points[0].metric"}),
    "metric of 129 characters": (with_(P0 + ("metric",), "m" * 129), {"points[0].metric"}),
    "metric with a colon": (with_(P0 + ("metric",), "a:b"), {"points[0].metric"}),
    "component of 257 characters": (with_(P0 + ("component",), "c" * 257), {"points[0].component"}),
    "component empty": (with_(P0 + ("component",), ""), {"points[0].component"}),
    "value nan spelt in lower case": (with_(P0 + ("value",), "nan"), {"points[0].value"}),
    "value null": (with_(P0 + ("value",), None), {"points[0].value"}),
    "value boolean": (with_(P0 + ("value",), False), {"points[0].value"}),
    "value numeric string": (with_(P0 + ("value",), "2.31"), {"points[0].value"}),
    "value missing": (with_(P0 + ("value",), DELETE), {"points[0].value"}),
    "time negative": (with_(P0 + ("time",), -1), {"points[0].time"}),
    "time a string": (with_(P0 + ("time",), "2026-11-30T10:00:00Z"), {"points[0].time"}),
    "layer unknown": (with_(P0 + ("layer",), "physics"), {"points[0].layer"}),
    "layer null": (with_(P0 + ("layer",), None), {"points[0].layer"}),
    "condition unknown": (with_(E0 + ("condition",), "on_fire"), {"events[0].condition"}),
    "condition missing": (with_(E0 + ("condition",), DELETE), {"events[0].condition"}),
    "event component missing": (with_(E0 + ("component",), DELETE), {"events[0].component"}),
    "event component of 257 characters": (with_(E0 + ("component",), "c" * 257), {"events[0].component"}),
    "magnitude a string": (with_(E0 + ("magnitude",), "7.5"), {"events[0].magnitude"}),
    "detail an array": (with_(E0 + ("detail",), [1]), {"events[0].detail"}),
    "phase name empty": (with_(("phases", 0, "phase"), ""), {"phases[0].phase"}),
    "phase name of 65 characters": (with_(("phases", 0, "phase"), "p" * 65), {"phases[0].phase"}),
    "phase step missing": (with_(("phases", 0, "step"), DELETE), {"phases[0].step"}),
    "run name of 257 characters": (with_(("run", "name"), "n" * 257), {"run.name"}),
    "code_rev of 129 characters": (with_(("run", "code_rev"), "c" * 129), {"run.code_rev"}),
    "data_snapshot a number": (with_(("run", "data_snapshot"), 5), {"run.data_snapshot"}),
    "config an array": (with_(("run", "config"), [1]), {"run.config"}),
    "tag a number": (with_(("run", "tags", "nodes"), 8), {"run.tags.nodes"}),
    "tag of 257 characters": (with_(("run", "tags", "team"), "t" * 257), {"run.tags.team"}),
    "budget steps 0": (with_(("run", "budget", "steps"), 0), {"run.budget.steps"}),
    "budget steps fractional": (with_(("run", "budget", "steps"), 10.5), {"run.budget.steps"}),
    "budget gpu_hours 0": (with_(("run", "budget", "gpu_hours"), 0), {"run.budget.gpu_hours"}),
    "batch_id empty": (with_(("batch_id",), ""), {"batch_id"}),
    "batch_id of 129 characters": (with_(("batch_id",), "b" * 129), {"batch_id"}),
    "several bad fields": (
        with_(("points", 1, "value"), "nan", with_(P0 + ("step",), -1, with_(E0 + ("condition",), "x"))),
        {"points[0].step", "points[1].value", "events[0].condition"},
    ),
}


def body(batch) -> bytes:
    return json.dumps(batch, allow_nan=False).encode()


def contract_errors(batch_or_body):
    """The contract's error list for a batch (a dict or raw bytes); [] when it accepts it."""
    raw = batch_or_body if isinstance(batch_or_body, bytes) else body(batch_or_body)
    try:
        parse_json_batch(raw)
    except ContractError as exc:
        return exc.errors
    return []


# ---- verdicts and paths (these run with or without jsonschema) ----


@pytest.mark.parametrize("name", VALID)
def test_contract_accepts_valid_batch(name):
    assert contract_errors(VALID[name]) == []


@pytest.mark.parametrize("name", INVALID)
def test_contract_rejects_invalid_batch_naming_every_bad_field(name):
    batch, paths = INVALID[name]
    errors = contract_errors(batch)
    assert {e["path"] for e in errors} == paths, errors
    assert all(e["message"].strip() for e in errors)


# ---- agreement with the JSON Schema ----


@pytest.fixture(scope="module")
def schema():
    text = SCHEMA_PATH.read_bytes()
    assert hashlib.sha256(text).hexdigest() == SCHEMA_SHA256, "tests/data/ingest-v1.schema.json is not contract v1's schema"
    return json.loads(text)


@pytest.fixture(scope="module")
def schema_validator(schema):
    jsonschema = pytest.importorskip("jsonschema")
    # The deliberate differences a schema can say: the console's bounds on times, budgets and tags.
    schema = copy.deepcopy(schema)
    schema["$defs"]["time"]["maximum"] = MAX_TIME
    run = schema["$defs"]["run"]["properties"]
    run["budget"]["properties"]["steps"]["maximum"] = MAX_STEP
    run["tags"].update(maxProperties=MAX_TAGS, propertyNames={"maxLength": MAX_TAG_KEY})
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def schema_locations(validator, batch):
    """Where the schema finds errors, written the contract's way ("points[0].step"; "" for the batch itself)."""
    locations = set()
    for error in validator.iter_errors(batch):
        path = ""
        for part in error.absolute_path:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        locations.add(path)
    return locations


def _under(path, location):
    return location == "" or path == location or path.startswith((location + ".", location + "["))


def assert_agree(validator, batch):
    errors = contract_errors(batch)
    contract_paths = {e["path"] for e in errors}
    schema_paths = schema_locations(validator, batch)
    assert bool(contract_paths) == bool(schema_paths), (
        f"contract says {sorted(contract_paths) or 'valid'}, schema says {sorted(schema_paths) or 'valid'} for {batch}"
    )
    # Same places: each contract error lies at or under a schema error, and each schema error has one there.
    # (The schema reports an unknown or missing field at the object that holds it, the contract at the field.)
    for path in contract_paths:
        assert any(_under(path, loc) for loc in schema_paths), (path, schema_paths, batch)
    for loc in schema_paths:
        assert any(_under(path, loc) for path in contract_paths), (loc, contract_paths, batch)


def test_schema_copy_is_contract_v1(schema):
    assert schema["title"] == "Ingest batch, version 1"


@pytest.mark.parametrize("name", VALID)
def test_schema_agrees_valid(schema_validator, name):
    assert_agree(schema_validator, VALID[name])


@pytest.mark.parametrize("name", INVALID)
def test_schema_agrees_invalid(schema_validator, name):
    assert_agree(schema_validator, INVALID[name][0])


# Values a mutation may put anywhere. Left out on purpose: the deliberate differences listed
# in the module docstring (non-finite numbers, NUL, trailing newlines, huge ints in floats...).
POOL = [
    None, True, False, 0, 1, -1, 2.5, 3.0, 10**20, 1e300, 2**53 - 1, 2**53,
    "", "x", "NaN", "nan", "Infinity", "-Infinity", "loss", "layers.3.attn", "dead", "warmup", "system",
    "a b", "r" * 129, "y" * 257, [], [1, "a"], {}, {"k": "v"}, {"step": 1, "metric": "m", "value": 1},
]


def _locations(node, path=()):
    yield path
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _locations(child, path + (key,))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _locations(child, path + (index,))


def mutate(batch, rng):
    batch = copy.deepcopy(batch)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in _locations(batch) if p])
        *parents, last = path
        parent = batch
        for key in parents:
            parent = parent[key]
        action = rng.random()
        if action < 0.6:
            parent[last] = copy.deepcopy(rng.choice(POOL))
        elif action < 0.8:
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last]["zz_unknown"] = rng.choice(POOL)
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
    return batch


def test_schema_agrees_on_random_mutations_of_the_example(schema_validator):
    rng = random.Random(20261130)
    accepted = rejected = 0
    for _ in range(400):
        batch = mutate(EXAMPLE, rng)
        assert_agree(schema_validator, batch)
        if contract_errors(batch):
            rejected += 1
        else:
            accepted += 1
    # The mutations must exercise both verdicts, or the agreement means little.
    assert accepted > 40 and rejected > 200, (accepted, rejected)


# ---- deliberate differences: the contract refuses what the schema cannot express ----


def _paths(raw):
    return {e["path"] for e in contract_errors(raw)}


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_bare_nonfinite_step_is_refused(token):
    raw = b'{"run": {"id": "r"}, "points": [{"step": %s, "metric": "loss", "value": 1}]}' % token.encode()
    assert _paths(raw) == {"points[0].step"}


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_bare_nonfinite_value_is_data(token):
    raw = b'{"run": {"id": "r"}, "points": [{"step": 1, "metric": "loss", "value": %s}]}' % token.encode()
    value = parse_json_batch(raw).points[0][3]
    assert math.isnan(value) if token == "NaN" else value == float(token)


def test_bare_nonfinite_time_is_refused():
    raw = b'{"run": {"id": "r"}, "points": [{"step": 1, "metric": "loss", "value": 1, "time": Infinity}]}'
    assert _paths(raw) == {"points[0].time"}


def test_detail_over_4_kib_is_refused():
    assert _paths(with_(E0 + ("detail",), {"note": "x" * 4096})) == {"events[0].detail"}


def test_huge_integers_where_a_float_is_stored_are_refused():
    huge = 10**400
    batch = with_(P0 + ("time",), huge, with_(E0 + ("magnitude",), huge, with_(("run", "budget", "gpu_hours"), huge)))
    assert _paths(body(batch)) == {"points[0].time", "events[0].magnitude", "run.budget.gpu_hours"}
    assert _paths(body(with_(P0 + ("value",), huge))) == {"points[0].value"}


def test_deadline_without_a_zone_is_refused():
    assert _paths(with_(("run", "budget", "deadline"), "2026-12-01T00:00:00")) == {"run.budget.deadline"}


def test_nul_character_is_refused_in_stored_text():
    batch = with_(("run", "name"), "a\x00b", with_(("run", "config", "k"), ["\x00"]))
    assert _paths(batch) == {"run.name", "run.config.k[0]"}


def test_unpaired_surrogate_escape_is_refused():
    assert _paths(b'{"run": {"id": "r", "name": "\\udc00"}}') == {""}
    assert _paths(b'{"run": {"id": "r", "name": "\\ud83d\\ude80"}}') == set()


@pytest.mark.parametrize(
    "field, path", [(("run", "id"), "run.id"), (P0 + ("metric",), "points[0].metric"), (P0 + ("component",), "points[0].component")]
)
def test_trailing_newline_after_a_name_is_refused(field, path):
    # ECMA-262's `$` (what JSON Schema patterns mean) does not match before a final newline.
    assert _paths(with_(field, "abc\n")) == {path}


def test_nonfinite_numbers_in_config_become_the_contracts_strings():
    raw = b'{"run": {"id": "r", "config": {"clip": Infinity, "x": [NaN, -Infinity]}}}'
    assert parse_json_batch(raw).run["config"] == {"clip": "Infinity", "x": ["NaN", "-Infinity"]}


def test_budget_steps_written_as_a_whole_float_is_stored_as_an_integer():
    steps = parse_json_batch(body(with_(("run", "budget", "steps"), 100000.0))).run["budget"]["steps"]
    assert steps == 100000 and type(steps) is int


# ---- limits, empty and malformed bodies ----


def test_item_limit_counts_points_and_events_together():
    items = {"run": {"id": "r"}, "points": [{"step": 1, "metric": "m", "value": 1}] * (MAX_ITEMS // 2),
             "events": [{"step": 1, "component": "c", "condition": "dead", "magnitude": 1}] * (MAX_ITEMS // 2)}
    assert parse_json_batch(body(items))
    items["events"].append(items["events"][0])
    with pytest.raises(TooLarge) as caught:
        parse_json_batch(body(items))
    assert caught.value.status == 413 and "10001 points and events" in caught.value.errors[0]["message"]


def test_body_size_limit():
    raw = body({"run": {"id": "r"}})
    with pytest.raises(TooLarge):
        parse_json_batch(raw + b" " * (4 * 1024 * 1024 + 1 - len(raw)))
    assert parse_json_batch(raw + b" " * (4 * 1024 * 1024 - len(raw)))


@pytest.mark.parametrize("raw, words", [(b"", "empty body"), (b"  \n", "empty body"), (b"{", "malformed JSON"),
                                        (b"[]", "must be a JSON object"), (b"\xff", "not UTF-8")])
def test_empty_and_malformed_bodies(raw, words):
    errors = contract_errors(raw)
    assert [e["path"] for e in errors] == [""] and words in errors[0]["message"]


# ---- NDJSON: lines counted from 1, every message of a line starts with "line N:" ----


def ndjson_errors(*lines):
    try:
        parse_ndjson(("\n".join(lines) + "\n").encode())
    except ContractError as exc:
        return exc.errors
    return []


POINT = '{"type": "point", "run": "r", "step": %s, "metric": "loss", "value": %s}'


def test_ndjson_errors_name_their_line():
    errors = ndjson_errors('{"type": "run", "id": "r"}', POINT % (1, 1), POINT % (-2, 1), "", POINT % (3, '"nan"'), "{")
    assert [(e["path"], e["message"].split(":")[0]) for e in errors] == [
        ("lines[3].step", "line 3"),
        ("lines[5].value", "line 5"),
        ("lines[6]", "line 6"),
    ]


def test_ndjson_valid_lines_parse_with_phase_positions():
    batch = parse_ndjson(("\n".join([
        '{"type": "run", "id": "r", "name": "n"}',
        POINT % (1, 1),
        '{"type": "phase", "run": "r", "step": 2, "phase": "eval"}',
        POINT % (2, '"NaN"'),
    ]) + "\n").encode())
    assert batch.run == {"id": "r", "name": "n"} and len(batch.points) == 2
    assert [(p.step, p.phase, p.position) for p in batch.phases] == [(2, "eval", 1)]


def test_ndjson_needs_a_run():
    errors = ndjson_errors('{"type": "point", "step": 1, "metric": "loss", "value": 1}')
    assert [e["path"] for e in errors] == ["lines[1].run"]


def test_metric_vocabulary():
    assert [layer_for_metric(m) for m in ("gpu_util", "data/skew", "eval/acc", "val/loss", "grad_norm", "whatever")] == [
        "system", "data", "generalization", "generalization", "numerics", "optimization"]
