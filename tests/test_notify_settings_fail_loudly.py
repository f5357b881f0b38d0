"""The notification settings come from the environment; a bad value stops the start-up with its name."""
import pytest

from tests.test_settings_fail_loudly import start


@pytest.mark.parametrize("name, value", [
    ("NOTIFY_REPEAT_MINUTES", "half an hour"), ("NOTIFY_REPEAT_MINUTES", "-1"),
    ("NOTIFY_MAX_TRIES", "0"), ("NOTIFY_RETRY_SECONDS", "0"), ("NOTIFY_TIMEOUT_SECONDS", "5s"),
    ("NOTIFY_SWEEP_SECONDS", "1"), ("NOTIFY_ALERTMANAGER_REFRESH_SECONDS", "5"),
    ("NOTIFY_MAX_INFLIGHT_PER_PROJECT", "0"), ("NOTIFY_MAX_INFLIGHT_PER_PROJECT", "four"),
])
def test_a_bad_value_is_named(tmp_path, name, value):
    result = start({name: value}, tmp_path)
    assert result.returncode != 0
    assert name in result.stderr and repr(value) in result.stderr


def test_good_values_start(tmp_path):
    result = start({"NOTIFY_REPEAT_MINUTES": "0", "NOTIFY_MAX_TRIES": "3", "NOTIFY_SWEEP_SECONDS": "30"}, tmp_path)
    assert result.returncode == 0, result.stderr
