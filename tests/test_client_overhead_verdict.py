"""benchmarks/client_overhead.py says met or MISSED only when its own A/A noise floor is below the target's margin;
otherwise it says there is no verdict, and why."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "client_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("client_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configs(aa_blocks, log_only_blocks):
    base = [0.100, 0.100, 0.100, 0.100]
    rows = [("baseline", base), ("log-only", log_only_blocks), ("baseline-b", aa_blocks)]
    return [SimpleNamespace(name=n, times=list(b), blocks=list(b), cpu_blocks=list(b), console_cpu=0.0) for n, b in rows]


def test_a_noisy_machine_gives_no_verdict_and_says_why(bench, capsys):
    # The A/A row spreads ±9-14 % over the rounds: a 1 % target cannot be judged.
    status = bench.report(configs([0.091, 0.114, 0.100, 0.104], [0.130, 0.130, 0.130, 0.130]), {}, 1.0, {"log-only": 1.01})
    out = capsys.readouterr().out
    assert status == 2 and "MISSED" not in out and "| no verdict |" in out
    assert "A/A noise floor" in out and "±14.00%" in out and "no verdict on log-only (target 1%)" in out


def test_a_quiet_machine_gives_the_verdict(bench, capsys):
    quiet = [0.1002, 0.0999, 0.1001, 0.1000]
    assert bench.report(configs(quiet, [0.1300] * 4), {}, 1.0, {"log-only": 1.01}) == 1
    assert "| MISSED |" in capsys.readouterr().out
    assert bench.report(configs(quiet, [0.1005] * 4), {}, 1.0, {"log-only": 1.01}) == 0
    assert "| met |" in capsys.readouterr().out
