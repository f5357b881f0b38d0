"""Failed logins are throttled per user name and per address: 429 with Retry-After, even for the right password.

Only failures count: people logging in normally from one address (a team
behind a NAT) are never throttled. Limits: LOGIN_FAILURES_PER_USER (10),
LOGIN_FAILURES_PER_ADDRESS (50), within AUTH_FAILURE_WINDOW_SECONDS (900).
"""
import pytest
from django.conf import settings
from django.test import Client

from opsconsole import throttle

pytestmark = pytest.mark.django_db


def log_in(client, username, password, address="203.0.113.7", path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in(client):
    return "_auth_user_id" in client.session


@pytest.fixture
def clock(monkeypatch):
    now = [1_800_000_000.0]
    monkeypatch.setattr(throttle, "clock", lambda: now[0])
    return now


def test_a_hundred_wrong_passwords_then_the_right_one_is_refused_with_429(owner):
    client = Client()
    answers = [log_in(client, "olivia", f"guess-{i}").status_code for i in range(100)]
    assert answers == [200] * settings.LOGIN_FAILURES_PER_USER + [429] * (100 - settings.LOGIN_FAILURES_PER_USER)
    response = log_in(client, "olivia", "pw-olivia")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= settings.AUTH_FAILURE_WINDOW_SECONDS
    assert "Too many failed logins" in response.content.decode()
    assert not logged_in(client)


def test_the_lockout_ends_with_its_window(owner, clock):
    client = Client()
    for i in range(settings.LOGIN_FAILURES_PER_USER):
        log_in(client, "olivia", f"guess-{i}")
    response = log_in(client, "olivia", "pw-olivia")
    assert response.status_code == 429
    clock[0] += int(response["Retry-After"])
    assert log_in(client, "olivia", "pw-olivia").status_code == 302
    assert logged_in(client)


def test_the_user_is_locked_out_from_every_address(owner):
    for i in range(settings.LOGIN_FAILURES_PER_USER):
        log_in(Client(), "olivia", f"guess-{i}", address=f"198.51.100.{i}")
    assert log_in(Client(), "olivia", "pw-olivia", address="192.0.2.1").status_code == 429


def test_one_address_guessing_many_user_names_is_throttled_for_everyone_there(owner, teammate):
    client = Client()
    for i in range(settings.LOGIN_FAILURES_PER_ADDRESS):
        assert log_in(client, f"user-{i}", "guess").status_code == 200
    assert log_in(client, "tariq", "pw-tariq").status_code == 429
    assert log_in(Client(), "tariq", "pw-tariq", address="192.0.2.1").status_code == 302  # another address is not


def test_a_team_behind_one_address_logging_in_normally_is_never_throttled(owner, teammate, outsider):
    people = [("olivia", "pw-olivia"), ("tariq", "pw-tariq"), ("oscar", "pw-oscar")]
    for day in range(40):
        for username, password in people:
            client = Client()
            if day % 8 == 0:
                assert log_in(client, username, "typo").status_code == 200  # now and then, a typo
            assert log_in(client, username, password).status_code == 302
            assert logged_in(client)


def test_a_success_starts_the_users_count_again(owner):
    client = Client()
    for _ in range(2):
        for i in range(settings.LOGIN_FAILURES_PER_USER - 1):
            assert log_in(client, "olivia", f"guess-{i}", address=f"198.51.100.{i}").status_code == 200
        assert log_in(client, "olivia", "pw-olivia").status_code == 302


def test_the_admin_login_is_throttled_too(django_user_model):
    django_user_model.objects.create_superuser("root", password="pw-root")
    client = Client()
    for i in range(settings.LOGIN_FAILURES_PER_USER):
        assert log_in(client, "root", f"guess-{i}", path="/admin/login/").status_code == 200
    response = log_in(client, "root", "pw-root", path="/admin/login/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert log_in(client, "root", "pw-root").status_code == 429  # one count for both login pages


def test_the_login_page_itself_is_not_throttled(owner):
    client = Client()
    for i in range(settings.LOGIN_FAILURES_PER_USER):
        log_in(client, "olivia", f"guess-{i}")
    assert client.get("/accounts/login/", REMOTE_ADDR="203.0.113.7").status_code == 200


def test_a_cache_that_is_down_never_locks_anyone_out(settings, owner, caplog):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"socket_connect_timeout": 1}}}
    client = Client()
    for i in range(settings.LOGIN_FAILURES_PER_USER + 5):
        assert log_in(client, "olivia", f"guess-{i}").status_code == 200
    assert log_in(client, "olivia", "pw-olivia").status_code == 302
    assert "throttle: cache: unreachable" in caplog.text
