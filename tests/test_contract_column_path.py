"""A JSON batch's points are parsed into small structs and checked a column at a time when every one
is well formed (ingest/contract.py `common_batch`); anything else is parsed again and checked point by point. Whichever path
takes a batch, a sender must not be able to tell: the same points come out, and one bad point
among thousands of good ones is still named by its index and field.
"""
import json
import math
import random

import pytest

from ingest.contract import ContractError, PointColumns, common_batch, parse_json_batch, parse_ndjson


def _good_points(n, seed=3):
    rng = random.Random(seed)
    points = []
    for i in range(n):
        point = {"step": i // 7, "metric": rng.choice(["loss", "grad_norm", "gpu_util", "data/tokens"])}
        point["value"] = rng.choice([rng.uniform(-1e6, 1e6), rng.randint(-2**53, 2**53), 0, -0.0, 5e-324,
                                     "NaN", "Infinity", "-Infinity"])
        if rng.random() < 0.6:
            point["component"] = rng.choice(["layers.3", "gpu5", "node3:9400/gpu5", "blocks[2].attn"])
        if rng.random() < 0.7:
            point["time"] = rng.choice([rng.uniform(0, 7_258_118_400), rng.randint(0, 7_258_118_400)])
        points.append(point)
    return points


def _body(points):
    return json.dumps({"run": {"id": "r"}, "points": points}).encode()  # json: orjson cannot write 10**400


def _one_by_one(points):
    """The same points as NDJSON lines, which are always checked point by point."""
    lines = [json.dumps({"type": "point", "run": "r", **p}).encode() for p in points]
    return list(parse_ndjson(b"\n".join(lines)).points)


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x[:3] == y[:3] and x[4:] == y[4:]
        assert type(x[0]) is int and type(x[3]) is float and (x[4] is None or type(x[4]) is float)
        assert (math.isnan(x[3]) and math.isnan(y[3])) or (x[3] == y[3] and math.copysign(1, x[3]) == math.copysign(1, y[3]))


def test_well_formed_points_read_the_same_on_either_path():
    points = _good_points(3000)
    batch = parse_json_batch(_body(points))
    assert isinstance(batch.points, PointColumns)  # the column path took it
    _same(list(batch.points), _one_by_one(points))
    _same([batch.points[i] for i in (0, 1, 2999)], [list(batch.points)[i] for i in (0, 1, 2999)])
    assert batch.step_range() == (0, 2999 // 7)


def test_an_integer_value_is_the_float_python_makes_of_it_on_either_path():
    # Halfway cases round to even; past 2**64 the parser no longer holds the integer in a machine word.
    values = [2**53 + 1, 2**53 + 3, -(2**63), 2**64 + 2**11, 2**80 + 2**27, 10**300, -(2**1023 + 2**970), 0]
    points = [{"step": i, "metric": "loss", "value": v} for i, v in enumerate(values)]
    batch = parse_json_batch(_body(points))
    assert isinstance(batch.points, PointColumns)
    assert [p[3] for p in batch.points] == [float(v) for v in values]
    _same(list(batch.points), _one_by_one(points))


@pytest.mark.parametrize("change, path, words", [
    ({"value": "nan"}, "value", "exact spelling"),
    ({"value": True}, "value", "a boolean"),
    ({"value": 10**400}, "value", "too large"),
    ({"step": -1}, "step", "from 0"),
    ({"step": 2.0}, None, None),  # a whole float step is a step: only the point-by-point path takes it
    ({"metric": "grad norm"}, "metric", "characters outside"),
    ({"metric": "loss rate"}, "metric", "characters outside"),
    ({"component": ""}, "component", "must not be empty"),
    ({"component": None}, "component", "got null"),
    ({"time": 7_258_118_401}, "time", "2200"),
    ({"time": None}, "time", "got null"),
    ({"layer": "bogus"}, "layer", "must be one of"),
    ({"unit": "s"}, "unit", "unknown field"),
])
def test_one_odd_point_among_thousands_is_judged_by_itself(change, path, words):
    points = _good_points(5000)
    points[4321] = {**points[4321], **change}
    assert common_batch(_body(points)) is None
    if path is None:
        batch = parse_json_batch(_body(points))
        _same(batch.points, _one_by_one(points))
        return
    with pytest.raises(ContractError) as caught:
        parse_json_batch(_body(points))
    assert len(caught.value.errors) == 1
    error = caught.value.errors[0]
    assert error["path"] == f"points[4321].{path}" and words in error["message"]


def test_a_layer_keeps_its_point_on_the_point_by_point_path():
    points = _good_points(100)
    points[50] = {**points[50], "layer": "numerics"}
    batch = parse_json_batch(_body(points))
    assert batch.points[50][5] == "numerics" and not isinstance(batch.points, PointColumns)


_ODD_VALUES = [None, True, False, "", "NaN", "nan", "Infinity", "-Infinity", "inf", 2.0, -1, 0, 2**53 + 1, 2**64, 10**400,
               1e308, -0.0, 7_258_118_400, 7_258_118_401, 9_007_199_254_740_991, 9_007_199_254_740_992, "loss",
               "layers.3", "blocks[2].attn", "a b", "\u00e9", "x" * 129, "x" * 257, [], {}, [1], {"step": 1}]


def _mutated_body(rng):
    """A JSON batch with a few of its points, or its top level, bent in one of the ways senders bend them."""
    points = _good_points(rng.randint(0, 40), seed=rng.randint(0, 10**6))
    for _ in range(rng.randint(0, 3)):
        if not points:
            break
        i = rng.randrange(len(points))
        key = rng.choice(["step", "metric", "value", "component", "time", "layer", "unit"])
        what = rng.random()
        if type(points[i]) is not dict:
            continue
        if what < 0.2:
            points[i].pop(key, None)
        elif what < 0.3:
            points[i] = rng.choice(_ODD_VALUES)
        else:
            points[i][key] = rng.choice(_ODD_VALUES)
    body = {"run": {"id": "r"}, "points": points}
    if rng.random() < 0.2:
        body[rng.choice(["batch_id", "events", "phases", "run", "points", "extra"])] = rng.choice(_ODD_VALUES)
    text = json.dumps(body)
    if rng.random() < 0.1:  # a key sent twice: the last one counts, on either path
        text = text.replace('"step": ', '"step": 1, "step": ', 1)
    return text.encode()


def _outcome(body):
    try:
        batch = parse_json_batch(body)
    except ContractError as exc:
        return "refused", exc.status, exc.errors
    points = [(s, m, c, repr(v), t, layer) for s, m, c, v, t, layer in batch.points]
    return "taken", batch.run, batch.batch_id, points, batch.phases, batch.events


def test_a_sender_cannot_tell_which_path_took_its_batch(monkeypatch):
    rng = random.Random(2026)
    bodies = [_mutated_body(rng) for _ in range(600)]
    fast = [_outcome(body) for body in bodies]
    monkeypatch.setattr("ingest.contract.common_batch", lambda body: None)
    assert [_outcome(body) for body in bodies] == fast
    assert 50 < sum(kind == "taken" for kind, *_ in fast) < 550  # both outcomes were exercised


_P = b'{"step":1,"metric":"loss","value":1.5}'


@pytest.mark.parametrize("body", [
    b'{"run":{"id":"r"},"points":[' + _P + b']} x',  # trailing garbage
    b'\xef\xbb\xbf{"run":{"id":"r"},"points":[' + _P + b']}',  # a byte-order mark
    b'{"run":{"id":"r"},"points":[' + _P + b'],"points":[' + _P + b',' + _P + b']}',  # the last "points" counts
    b'{"run":{"id":"r"},"points":[{"step":1,"metric":"loss","value":NaN}]}',  # Python's bare token
    b'{"run":{"id":"r","config":{"a":NaN}},"points":[' + _P + b']}',  # ... beside the points
    b'{"run":{"id":"r"},"batch_id":"b\\ud800","points":[' + _P + b']}',  # a lone surrogate beside them
    b'{"run":{"id":"r"},"points":[{"step":1,"metric":"lo\\u0000ss","value":1}]}',
    b'{"run":{"id":"r"},"points":[{"step":1,"metric":"loss","value":1,"time":1e999}]}',
    b'{"run":{"id":"r"},"points":[{"step":1,"metric":"loss","value":1e-400}]}',  # underflows to 0.0
    b'{"run":{"id":"r"},"points":[{"step":1,"metric":"loss","value":1,"step":2}]}',
    b'{"run":{"id":"r"},"points":[]}',
    b'{"points":[' + _P + b']}',
    b'{"run":null,"points":[' + _P + b']}',
    b'{"run":{"id":"r"},"points":[' + _P + b'],"events":[{"step":1}]}',
    b'{"run":{"id":"r"},"points":[' + _P + b'],}',
    b'[' + _P + b']',
])
def test_an_odd_body_reads_the_same_on_either_path(body, monkeypatch):
    fast = _outcome(body)
    monkeypatch.setattr("ingest.contract.common_batch", lambda body: None)
    assert _outcome(body) == fast
