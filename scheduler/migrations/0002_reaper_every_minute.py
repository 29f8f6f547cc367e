"""The reaper runs every minute (it was every 5): a send whose worker died is sent again with the
same random_id only within TELEGRAM_RANDOM_ID_WINDOW of its claim, so its lease (5 minutes) and
the reaper's interval must fit in that window. A schedule an operator changed is left alone."""

from django.db import migrations


def every_minute(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    for task in PeriodicTask.objects.filter(task="scheduler.reap_expired_claims", crontab__minute="*/5"):
        if not task.description.startswith("Default schedule"):
            continue  # edited by an operator: theirs
        old = task.crontab
        task.crontab, _ = CrontabSchedule.objects.get_or_create(
            minute="*", hour=old.hour, day_of_week=old.day_of_week, day_of_month=old.day_of_month,
            month_of_year=old.month_of_year, timezone=old.timezone,
        )  # fmt: skip
        task.description = task.description.replace("(*/5 * * * *", "(* * * * *")
        task.save(update_fields=["crontab", "description"])


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(every_minute, migrations.RunPython.noop)]
