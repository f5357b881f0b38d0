"""Upgrading: the alerts stored before incidents existed are grouped into incidents, and those a person had
acknowledged or judged count as reviewed (so a resolved hard invariant somebody looked at is not sticky)."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("alerts", "0006_engine_weight_jump")]
AFTER = [("alerts", "0007_incidents")]


@pytest.fixture
def whole_schema_afterwards(transactional_db):
    """Migrating alerts back unapplies the apps built on them (reviews): every app is migrated forward again after."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_existing_alerts_are_grouped_and_reviews_carried_over(django_user_model, whole_schema_afterwards):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Project, Run = apps.get_model("ingest", "Project"), apps.get_model("ingest", "Run")
    Rule, Alert, AlertChange = (apps.get_model("alerts", m) for m in ("Rule", "Alert", "AlertChange"))
    project = Project.objects.create(slug="old")
    run = Run.objects.create(project=project, run_id="old-run")
    now = timezone.now()

    def rule(name, kind, metrics):
        return Rule.objects.create(project=project, name=name, kind=kind, owner="On-call <#oc>", scope={"metrics": metrics},
                                   persistence={"points": 1}, diagnostic_url="https://runbooks.example/x",
                                   permitted_response="notify")

    def alert(rule, component, metric, step, state):
        made = Alert.objects.create(rule=rule, run=run, component=component, metric=metric, first_step=step, last_step=step,
                                    fired_step=step, magnitude=1.0, magnitude_unit="x", state=state, fired_at=now,
                                    resolved_at=now if state == "resolved" else None)
        AlertChange.objects.create(alert=made, kind="fired", step=step, at=now)
        return made

    health, loss = rule("nonfinite-gradients", "nonfinite", ["grad_norm", "weight_norm"]), rule("nonfinite-loss", "nonfinite", ["loss"])
    origin = alert(health, "layers.4", "weight_norm", 30, "firing")
    spread = [alert(health, f"layers.{i}", "grad_norm", 30, "firing") for i in (0, 1, 2)]
    nan_loss = alert(loss, "", "loss", 30, "firing")
    later = alert(loss, "", "loss", 900, "resolved")  # another fault, long after
    looked_at = alert(health, "layers.9", "grad_norm", 2000, "resolved")
    AlertChange.objects.create(alert=looked_at, kind="acknowledged", at=now)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)

    from alerts.models import Alert as NewAlert, Incident
    from alerts.review import runs_needing_review

    first, second, third = Incident.objects.order_by("first_step")
    assert set(first.alerts.values_list("pk", flat=True)) == {origin.pk, nan_loss.pk, *(a.pk for a in spread)}
    assert (first.origin_id, first.state) == (origin.pk, "firing")
    assert list(second.alerts.values_list("pk", flat=True)) == [later.pk] and second.state == "needs_review"
    assert third.state == "resolved"  # its hard invariant had been acknowledged
    assert NewAlert.objects.get(pk=looked_at.pk).reviewed_at is not None
    assert runs_needing_review([run.pk]) == {run.pk}
