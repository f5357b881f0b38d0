"""Schedules set below the new floors (every_steps 100, every_hours 1) are raised to them, so that the
constraints of 0004 hold: such a schedule opened a review for every batch or every beat tick."""
from django.db import migrations

MIN_EVERY_STEPS = 100  # reviews.models.MIN_EVERY_STEPS when this migration was written
MIN_EVERY_HOURS = 1.0  # reviews.models.MIN_EVERY_HOURS


def raise_to_floors(apps, schema_editor):
    ReviewSchedule = apps.get_model("reviews", "ReviewSchedule")
    ReviewSchedule.objects.filter(every_steps__lt=MIN_EVERY_STEPS).update(every_steps=MIN_EVERY_STEPS)
    ReviewSchedule.objects.filter(every_hours__lt=MIN_EVERY_HOURS).update(every_hours=MIN_EVERY_HOURS)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0002_decision_log_append_only")]

    operations = [migrations.RunPython(raise_to_floors, migrations.RunPython.noop)]
