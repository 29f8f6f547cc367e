# Sequence steps: delays in seconds (issue 26, scope 4), existing minutes converted.

import django.core.validators
from django.db import migrations, models
from django.db.models import F


def minutes_to_seconds(apps, schema_editor):
    apps.get_model("botapp", "SequenceStep").objects.update(delay_seconds=F("delay_seconds") * 60)


def seconds_to_minutes(apps, schema_editor):
    # Back to whole minutes, rounded up: a step never comes earlier than it was set to.
    apps.get_model("botapp", "SequenceStep").objects.update(delay_seconds=(F("delay_seconds") + 59) / 60)


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0003_campaign_payloads"),
    ]

    operations = [
        migrations.AlterField(  # the old limit (525,600 minutes) would refuse a year in seconds
            model_name="sequencestep",
            name="delay_minutes",
            field=models.PositiveIntegerField(),
        ),
        migrations.RenameField(model_name="sequencestep", old_name="delay_minutes", new_name="delay_seconds"),
        migrations.RunPython(minutes_to_seconds, seconds_to_minutes),
        migrations.AlterField(
            model_name="sequencestep",
            name="delay_seconds",
            field=models.PositiveIntegerField(
                help_text="Sent this many seconds after the user's /start (e.g. 40, 180 for 3 min, 7200 for 2 h): 0 to 31,536,000 (a year).",
                validators=[django.core.validators.MaxValueValidator(31536000)],
            ),
        ),
        migrations.AlterModelOptions(name="sequencestep", options={"ordering": ["sequence", "delay_seconds", "id"]}),
    ]
