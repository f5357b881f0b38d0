"""Creating, editing and deleting channels: every path goes through here, each change a ChannelChange row.

What each kind needs (checked by `channel_errors`, each problem on the field it concerns, `config.<key>` for config):

- webhook, slack: `url`, http(s); a webhook's `secret` signs its body (docs/notifications.md).
- every URL: no control characters, and a host whose addresses are not loopback, private, link-local,
  unique-local or otherwise internal unless NOTIFY_ALLOWED_NETWORKS lists them (notifications/destinations.py);
  every secret: no control characters.
- alertmanager: `url`, the Alertmanager's base URL (alerts go to `<url>/api/v2/alerts`); `secret`, if set, is
  sent as a bearer token; `config.labels`, extra labels added to every alert (names as Prometheus allows).
- email: `config.recipients`, a list of addresses (sent through Django's EMAIL_BACKEND); no URL.
- mlflow: `url`, the tracking server; `secret`, a bearer token if it needs one; `config.run_id_tag`, the run tag
  holding the MLflow run id (default `mlflow_run_id`), `config.runs`, run id -> MLflow run id, for runs without it.
"""
import json
import re
from urllib.parse import urlparse

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from notifications import destinations
from notifications.models import Channel, ChannelAction, ChannelChange, ChannelKind

EDIT_DENIED = "editing notification channels needs the rule admin role in this project"
FIELDS = ("name", "kind", "url", "secret", "config", "enabled")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# The labels every pushed incident carries (routing.message_for): a channel's extra labels may not replace them.
RESERVED_LABELS = {"alertname", "run", "component", "rule", "severity", "project", "incident"}
CONFIG_KEYS = {
    ChannelKind.WEBHOOK: set(),
    ChannelKind.SLACK: set(),
    ChannelKind.ALERTMANAGER: {"labels"},
    ChannelKind.EMAIL: {"recipients"},
    ChannelKind.MLFLOW: {"run_id_tag", "runs"},
}
MAX_RECIPIENTS = 50
# A channel's config is read on every delivery and shown on its page: bounded well below the 4 MiB body a request
# may carry (7,000 labels a channel were once taken). 1,000 mapped runs of ordinary ids fit in MAX_CONFIG_BYTES.
MAX_LABELS = 50
MAX_LABEL_NAME = 100
MAX_RUNS = 1000
MAX_RUN_ID = 128  # ingest.models.Run.run_id
MAX_RUN_ID_TAG = 128  # a run's tag names (ingest.contract.MAX_TAG_KEY)
MAX_CONFIG_BYTES = 128 * 1024


def _control_characters(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _url_error(url, *, destination=True) -> str | None:
    if not isinstance(url, str) or not url:
        return "this channel kind needs a URL"
    if _control_characters(url):  # urlsplit drops CR, LF and tab without a word: checked on the text itself
        return "must not contain control characters (CR, LF, tab, ...)"
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "must be an http(s):// URL with a host"
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return "the port must be a number from 0 to 65535"
    return _destination_error(parsed.hostname, port) if destination else None


def _destination_error(host: str, port: int) -> str | None:
    """Why the host may not be sent to, on the addresses it resolves to now; sending checks them again.

    A name that does not resolve (yet) is saved: each try resolves it afresh and refuses what is not allowed.
    """
    try:
        addresses = destinations.resolve(host, port, float(settings.NOTIFY_TIMEOUT_SECONDS))
    except OSError:  # TimeoutError included
        return None
    why = destinations.refusal_of(addresses)
    if why is None:
        return None
    article = "an" if why[0] in "aeiou" else "a"
    return (f"destination not allowed: {host} is {article} {why}; channels may not point into the site's own network "
            "unless NOTIFY_ALLOWED_NETWORKS lists it")


def _secret_error(secret) -> str | None:
    # A header cannot carry them; sent anyway they would end up quoted in an error.
    if isinstance(secret, str) and _control_characters(secret):
        return "must not contain control characters (CR, LF, tab, ...)"
    return None


def _string_map(value, path, errors, key_re=None, reserved=()):
    if not isinstance(value, dict):
        errors[path] = "must be an object of strings"
        return
    for key, item in value.items():
        if key_re is not None and not key_re.match(key):
            errors[f"{path}.{key}"] = "a label name is letters, digits and underscores, not starting with a digit"
        elif key in reserved:
            errors[f"{path}.{key}"] = f"{key} is set by the console on every incident"
        elif not isinstance(item, str) or not item or len(item) > 500:
            errors[f"{path}.{key}"] = "must be a non-empty string of at most 500 characters"


def channel_errors(kind, url, config, secret="", enabled=True) -> dict:
    """What is wrong with a channel's kind, URL, config and secret: {field: message}.

    A disabled channel sends nothing, so where its URL points is not judged: an admin can switch off a channel whose
    host has since become internal (enabling it judges it again, as every try does)."""
    if kind not in ChannelKind.values:
        return {"kind": f"must be one of {', '.join(ChannelKind.values)}"}
    errors = {}
    if problem := _secret_error(secret):
        errors["secret"] = problem
    if kind != ChannelKind.EMAIL and (problem := _url_error(url, destination=enabled)):
        errors["url"] = problem
    if not isinstance(config, dict):
        errors["config"] = "must be an object"
        return errors
    if bounds := _config_bound_errors(config):
        return {**errors, **bounds}  # over a bound: its entries are not worth checking one by one
    for key in sorted(set(config) - CONFIG_KEYS[kind]):
        errors[f"config.{key}"] = f"not a setting of a {kind} channel" + (
            f" (it takes {', '.join(sorted(CONFIG_KEYS[kind]))})" if CONFIG_KEYS[kind] else "")
    if kind == ChannelKind.EMAIL:
        recipients = config.get("recipients")
        if not isinstance(recipients, list) or not recipients or len(recipients) > MAX_RECIPIENTS:
            errors["config.recipients"] = f"an email channel needs a list of 1 to {MAX_RECIPIENTS} addresses"
        else:
            for address in recipients:
                try:
                    validate_email(address if isinstance(address, str) else "")
                except ValidationError:
                    errors["config.recipients"] = f"not an email address: {str(address)[:100]!r}"
                    break
    if "labels" in config:
        _string_map(config["labels"], "config.labels", errors, LABEL_NAME, RESERVED_LABELS)
    if "runs" in config:
        _string_map(config["runs"], "config.runs", errors)
    if "run_id_tag" in config and (not isinstance(config["run_id_tag"], str) or not config["run_id_tag"]):
        errors["config.run_id_tag"] = "must be a non-empty string"
    return errors


def _config_bound_errors(config: dict) -> dict:
    """How a config exceeds its bounds: {`config.<key>`: message}, the key at fault named."""
    errors = {}
    labels, runs, tag = config.get("labels"), config.get("runs"), config.get("run_id_tag")
    if isinstance(labels, dict):
        if len(labels) > MAX_LABELS:
            errors["config.labels"] = f"at most {MAX_LABELS} labels, got {len(labels)}"
        elif any(len(name) > MAX_LABEL_NAME for name in labels):
            errors["config.labels"] = f"a label name is at most {MAX_LABEL_NAME} characters"
    if isinstance(runs, dict):
        if len(runs) > MAX_RUNS:
            errors["config.runs"] = f"at most {MAX_RUNS} mapped runs, got {len(runs)}"
        elif any(len(run_id) > MAX_RUN_ID for run_id in runs):
            errors["config.runs"] = f"a run id is at most {MAX_RUN_ID} characters"
    if isinstance(tag, str) and len(tag) > MAX_RUN_ID_TAG:
        errors["config.run_id_tag"] = f"at most {MAX_RUN_ID_TAG} characters, got {len(tag)}"
    if not errors and config:
        sizes = {key: _json_size(key) + _json_size(value) for key, value in config.items()}
        if sum(sizes.values()) > MAX_CONFIG_BYTES:
            largest = max(sizes, key=sizes.get)
            errors[f"config.{largest[:100]}"] = (f"the settings take {sum(sizes.values()):,} bytes as JSON, "
                                                 f"{sizes[largest]:,} of them this one; at most {MAX_CONFIG_BYTES:,} in all")
    return errors


def _json_size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def check(channel: Channel):
    errors = channel_errors(channel.kind, channel.url, channel.config, channel.secret, channel.enabled)
    if errors:
        raise ValidationError(errors)


def save_channel(channel: Channel, *, user=None, source: str, changed=None) -> Channel:
    """Validate and save, recording who changed which fields in the same transaction (never the secret's value)."""
    channel.full_clean()
    check(channel)
    action = ChannelAction.UPDATED if channel.pk else ChannelAction.CREATED
    fields = sorted(changed if changed is not None else FIELDS)
    with transaction.atomic():
        channel.save()
        ChannelChange.objects.create(channel=channel, project_id=channel.project_id, channel_name=channel.name,
                                     action=action, fields=fields, by=_by(user), source=source)
    return channel


def delete_channel(channel: Channel, *, user=None, source: str) -> bool:
    """Delete the channel and its logs, recording who did; False when it was already gone (nothing recorded).

    The row lock comes first: a test message logging its try holds it (notifications.status.send_test), so the
    delete waits for that row and takes it with the rest, rather than missing it and failing on the foreign key.
    """
    with transaction.atomic():
        if not Channel.objects.select_for_update().filter(pk=channel.pk).exists():
            return False
        ChannelChange.objects.create(channel=None, project_id=channel.project_id, channel_name=channel.name,
                                     action=ChannelAction.DELETED, fields=[], by=_by(user), source=source)
        channel.delete()
    return True


def _by(user):
    return user if getattr(user, "pk", None) and getattr(user, "is_authenticated", False) else None


def changed_fields(before: dict, after: Channel) -> list[str]:
    return [f for f in FIELDS if before.get(f) != getattr(after, f)]


def snapshot(channel: Channel) -> dict:
    return {f: getattr(channel, f) for f in FIELDS}
