"""A JSON batch's points are checked a column at a time when every one is well formed
(ingest/contract.py `common_points`); anything else is checked point by point. Whichever path
takes a batch, a sender must not be able to tell: the same points come out, and one bad point
among thousands of good ones is still named by its index and field.
"""
import json
import math
import random

import orjson
import pytest

from ingest.contract import ContractError, PointColumns, common_points, parse_json_batch, parse_ndjson


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
    lines = [orjson.dumps({"type": "point", "run": "r", **p}) for p in points]
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


@pytest.mark.parametrize("change, path, words", [
    ({"value": "nan"}, "value", "exact spelling"),
    ({"value": True}, "value", "a boolean"),
    ({"value": 10**400}, "value", "too large"),
    ({"step": -1}, "step", "from 0"),
    ({"step": 2.0}, None, None),  # a whole float step is a step: only the point-by-point path takes it
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
    assert common_points(points) is None
    if path is None:
        batch = parse_json_batch(_body(points))
        assert batch.points[4321][0] == 2
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
