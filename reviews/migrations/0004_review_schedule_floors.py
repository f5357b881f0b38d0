"""The floors of a review schedule below the application too: every_steps >= 100, every_hours >= 1
(reviews.models.MIN_EVERY_STEPS, MIN_EVERY_HOURS); 0003 raised the schedules set below them."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reviews', '0003_review_schedule_floors_data'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='reviewschedule',
            name='review_schedule_steps_positive',
        ),
        migrations.RemoveConstraint(
            model_name='reviewschedule',
            name='review_schedule_hours_positive',
        ),
        migrations.AddConstraint(
            model_name='reviewschedule',
            constraint=models.CheckConstraint(condition=models.Q(('every_steps__isnull', True), ('every_steps__gte', 100), _connector='OR'), name='review_schedule_steps_floor'),
        ),
        migrations.AddConstraint(
            model_name='reviewschedule',
            constraint=models.CheckConstraint(condition=models.Q(('every_hours__isnull', True), ('every_hours__gte', 1.0), _connector='OR'), name='review_schedule_hours_floor'),
        ),
    ]
