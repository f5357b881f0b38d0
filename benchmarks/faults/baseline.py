"""The phase-blind baseline: a rolling (EMA) z-score per series, run offline on contract-v1 NDJSON.

For every series (metric, component), in arrival order (the file's line order, restarts and
replayed steps included, phases ignored):

- EMA mean and variance with alpha = 0.97: m <- a*m + (1-a)*x; v <- a*v + (1-a)*(x - m_prev)^2,
  the mean starting at the series' first value and the variance at 0;
- z = (x - m_prev) / sqrt(v_prev) against the state before the point (a zero variance gives
  z = 0 for a value equal to the mean, else infinite);
- the first 10 finite points of a series only warm the EMA: nothing alerts until then;
- afterwards a point with |z| > 3, or a non-finite value, opens an alert for the series unless
  one is open; the alert stays open while points keep |z| > 3 (or non-finite) and closes at the
  first point with |z| <= 3;
- non-finite points never update the EMA.

Alerts look like the console's (`id`, `rule`, `component` None for the whole run, `metric`,
`step` = `fired_step` = the opening point's step, `last_step`, `magnitude` = the largest |z|),
so `score.py` scores both the same way. Event lines are not looked at.
"""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import orjson

ALPHA = 0.97
THRESHOLD = 3.0
WARMUP_POINTS = 10
RULE = {"id": None, "name": "baseline-ewma-z3", "owner": "benchmark", "permitted_response": "observe",
        "diagnostic_url": ""}

_WIRE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def wire_float(value) -> float:
    """A contract value (number, or the strings NaN / Infinity / -Infinity) as a float."""
    if isinstance(value, str):
        return _WIRE[value]
    return float(value)


def parse_line(raw: bytes) -> dict:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)  # the bare NaN / Infinity tokens Python's json writes


def read_ndjson(path: Path) -> list[bytes]:
    """The non-blank lines of a (gzipped) NDJSON file, as bytes without their line ends."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [line for line in data.splitlines() if line.strip()]


class RollingZ:
    """Feed points in arrival order with `feed`; read `alerts` at the end."""

    def __init__(self, alpha=ALPHA, threshold=THRESHOLD, warmup=WARMUP_POINTS, run=None):
        self.alpha = alpha
        self.threshold = threshold
        self.warmup = warmup
        self.run = run
        self.series: dict[tuple[str, str], list] = {}  # key -> [finite points seen, mean, variance, open alert]
        self.alerts: list[dict] = []

    def feed(self, metric: str, component: str, step: int, value: float):
        key = (metric, component or "")
        state = self.series.get(key)
        if state is None:
            state = self.series[key] = [0, 0.0, 0.0, None]
        n, m, v, alert = state
        finite = math.isfinite(value)
        if n < self.warmup:
            anomalous, z = False, 0.0
        elif not finite:
            anomalous, z = True, math.inf
        else:
            d = value - m
            if v > 0.0:
                z = abs(d) / math.sqrt(v)
            else:
                z = 0.0 if d == 0.0 else math.inf
            anomalous = z > self.threshold
        if anomalous:
            if alert is None:
                alert = state[3] = {
                    "id": len(self.alerts) + 1, "run": self.run, "rule": RULE,
                    "component": component or None, "metric": metric, "condition": None,
                    "step": step, "fired_step": step, "last_step": step, "magnitude": z, "state": "firing",
                }
                self.alerts.append(alert)
            else:
                alert["last_step"] = max(alert["last_step"], step)
                alert["magnitude"] = max(alert["magnitude"], z)
        elif alert is not None:
            alert["state"] = "resolved"
            state[3] = None
        if finite:
            if n == 0:
                state[1], state[2] = value, 0.0
            else:
                a = self.alpha
                state[1] = a * m + (1.0 - a) * value
                state[2] = a * v + (1.0 - a) * (value - m) ** 2
            state[0] = n + 1

    def feed_line(self, line: dict):
        if line.get("type") == "point":
            self.feed(line["metric"], line.get("component") or "", line["step"], wire_float(line["value"]))


def detect_lines(lines, run=None) -> list[dict]:
    """Baseline alerts for parsed NDJSON lines (dicts) in arrival order."""
    detector = RollingZ(run=run)
    for line in lines:
        detector.feed_line(line)
    return detector.alerts


def detect_file(path: Path) -> tuple[str, list[dict]]:
    """(run id, baseline alerts) for one NDJSON file."""
    lines = [parse_line(raw) for raw in read_ndjson(path)]
    run_id = lines[0]["id"] if lines and lines[0].get("type") == "run" else lines[0].get("run")
    return run_id, detect_lines(lines, run=run_id)


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        run_id, found = detect_file(Path(arg))
        print(f"{run_id}: {len(found)} baseline alerts")
        for a in found[:50]:
            print(f"  {a['metric']}@{a['component'] or 'run'} fired {a['fired_step']} last {a['last_step']} |z| {a['magnitude']:.1f}")
