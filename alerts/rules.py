"""Creating, editing and deleting rules: every path goes through here, and every change is a revision row."""
from django.db import transaction

from alerts.models import RevisionAction, Rule, RuleRevision

EDIT_DENIED = "editing rules needs the rule admin role in this project"


def name_conflict(project, name, rule=None) -> str | None:
    """The message when the project already has another rule of this name (asked only of its rule admins)."""
    if project is None or not name:
        return None
    others = Rule.objects.filter(project=project, name=name)
    if rule is not None and rule.pk:
        others = others.exclude(pk=rule.pk)
    return f"project {project.slug} already has a rule named {name!r}" if others.exists() else None


def _revision(rule, action, user, source):
    RuleRevision.objects.create(
        rule=rule if action != RevisionAction.DELETED else None,
        project=rule.project,
        rule_name=rule.name,
        action=action,
        snapshot=rule.snapshot(),
        changed_by=user if getattr(user, "pk", None) else None,
        source=source,
    )


def save_rule(rule: Rule, *, user=None, source: str) -> Rule:
    """Validate (governance included) and save, recording the revision in the same transaction."""
    rule.full_clean()
    action = RevisionAction.UPDATED if rule.pk else RevisionAction.CREATED
    with transaction.atomic():
        rule.save()
        _revision(rule, action, user, source)
    return rule


def delete_rule(rule: Rule, *, user=None, source: str):
    with transaction.atomic():
        _revision(rule, RevisionAction.DELETED, user, source)
        rule.delete()
