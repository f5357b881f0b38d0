"""Incidents, and who looked at an alert; the alerts stored before are marked reviewed and grouped.

An alert counts as reviewed from its first acknowledged or verdict row, or a
resolved row a person wrote. Each run's existing alerts are grouped into
incidents by the same judging functions evaluation uses (alerts/incidents.py;
they read plain attributes, so the historical models do).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

from alerts import incidents as judging


def _constraints_checked_now(schema_editor):
    """PostgreSQL: check the deferred foreign keys of the rows written here now. The schema editor creates the new
    indexes after every operation of the migration, and PostgreSQL refuses CREATE INDEX on a table with
    foreign-key checks still pending in the transaction."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def mark_reviewed(apps, schema_editor):
    Alert = apps.get_model("alerts", "Alert")
    AlertChange = apps.get_model("alerts", "AlertChange")
    firsts = {}
    looked = AlertChange.objects.filter(kind__in=["acknowledged", "verdict"]) | AlertChange.objects.filter(
        kind="resolved", by__isnull=False)
    for alert_id, at in looked.order_by("at").values_list("alert_id", "at"):
        firsts.setdefault(alert_id, at)
    for alert_id, at in firsts.items():
        Alert.objects.filter(pk=alert_id, reviewed_at__isnull=True).update(reviewed_at=at)
    _constraints_checked_now(schema_editor)


def group_existing(apps, schema_editor):
    Alert = apps.get_model("alerts", "Alert")
    Incident = apps.get_model("alerts", "Incident")
    IncidentChange = apps.get_model("alerts", "IncidentChange")
    now = timezone.now()
    run_ids = Alert.objects.filter(incident__isnull=True).values_list("run_id", flat=True).distinct()
    for run_id in list(run_ids):
        alerts = list(Alert.objects.filter(run_id=run_id, incident__isnull=True).select_related("rule"))
        groups = []
        for alert in sorted(alerts, key=judging.arrival_key):
            index = judging.place(alert, groups, judging.DEFAULT_INCIDENT_WINDOW_STEPS)
            if index is None:
                groups.append([alert])
            else:
                groups[index].append(alert)
        for group in groups:
            origin = judging.origin_of(group)
            incident = Incident.objects.create(
                run_id=run_id, origin=origin, first_step=min(a.first_step for a in group),
                severity=judging.severity_of(group), state=judging.state_of(group),
                opened_at=min(a.fired_at for a in group), resolved_at=judging.resolved_at_of(group),
            )
            Alert.objects.filter(pk__in=[a.pk for a in group]).update(incident=incident)
            IncidentChange.objects.create(incident=incident, kind="opened", alert=origin, state=incident.state, at=now,
                                          note=f"{len(group)} alerts stored before incidents existed, grouped")
    _constraints_checked_now(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('alerts', '0006_engine_weight_jump'),
        ('ingest', '0003_event_ended_by'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='alert',
            name='reviewed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='Incident',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_step', models.BigIntegerField()),
                ('severity', models.CharField(choices=[('observe', 'Observe'), ('notify', 'Notify'), ('review', 'Review'), ('stop', 'Stop'), ('rewind', 'Rewind')], max_length=16)),
                ('state', models.CharField(choices=[('firing', 'Firing'), ('acknowledged', 'Acknowledged'), ('muted', 'Muted'), ('needs_review', 'Needs Review'), ('resolved', 'Resolved')], default='firing', max_length=16)),
                ('opened_at', models.DateTimeField()),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('origin', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='alerts.alert')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='incidents', to='ingest.run')),
            ],
            options={
                'ordering': ['opened_at', 'id'],
            },
        ),
        migrations.AddField(
            model_name='alert',
            name='incident',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='alerts', to='alerts.incident'),
        ),
        migrations.CreateModel(
            name='IncidentChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('opened', 'Opened'), ('joined', 'Joined'), ('origin', 'Origin'), ('state', 'State'), ('acknowledged', 'Acknowledged'), ('verdict', 'Verdict'), ('muted', 'Muted')], max_length=16)),
                ('state', models.CharField(blank=True, choices=[('firing', 'Firing'), ('acknowledged', 'Acknowledged'), ('muted', 'Muted'), ('needs_review', 'Needs Review'), ('resolved', 'Resolved')], max_length=16)),
                ('previous', models.CharField(blank=True, choices=[('firing', 'Firing'), ('acknowledged', 'Acknowledged'), ('muted', 'Muted'), ('needs_review', 'Needs Review'), ('resolved', 'Resolved')], max_length=16)),
                ('at', models.DateTimeField()),
                ('note', models.TextField(blank=True)),
                ('verdict', models.CharField(blank=True, choices=[('actionable', 'Actionable'), ('false_alarm', 'False Alarm')], max_length=16)),
                ('alert', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='alerts.alert')),
                ('by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ('incident', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='changes', to='alerts.incident')),
                ('receipt', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='ingest.batchreceipt')),
            ],
            options={
                'ordering': ['id'],
            },
        ),
        migrations.CreateModel(
            name='IncidentSettings',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('window_steps', models.PositiveIntegerField(default=10)),
                ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='incident_settings', to='ingest.project')),
            ],
        ),
        migrations.AddIndex(
            model_name='incident',
            index=models.Index(fields=['run', 'state'], name='incident_run_state'),
        ),
        migrations.AddConstraint(
            model_name='incidentsettings',
            constraint=models.CheckConstraint(condition=models.Q(('window_steps__lte', 10000)), name='incident_window_bounded'),
        ),
        migrations.RunPython(mark_reviewed, migrations.RunPython.noop),
        migrations.RunPython(group_existing, migrations.RunPython.noop),
    ]
