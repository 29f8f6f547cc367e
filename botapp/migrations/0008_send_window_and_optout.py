from django.db import migrations, models

import botapp.models.settings


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0007_broadcast_pause"),
    ]

    operations = [
        migrations.AddField(
            model_name="botsettings",
            name="send_window_start",
            field=models.TimeField(
                blank=True,
                help_text="Sequence steps and broadcasts go out only from this time (e.g. 08:00) to the closing time. "
                "Both empty: at any time.",
                null=True,
                verbose_name="send window opens",
            ),
        ),
        migrations.AddField(
            model_name="botsettings",
            name="send_window_end",
            field=models.TimeField(
                blank=True,
                help_text="e.g. 22:00. Earlier than the opening crosses midnight (22:00 to 06:00). A step or broadcast "
                "due outside the window waits for its opening; replies to users are never held.",
                null=True,
                verbose_name="send window closes",
            ),
        ),
        migrations.AddField(
            model_name="botsettings",
            name="send_window_tz",
            field=models.CharField(
                blank=True,
                help_text="The zone of those times, e.g. Europe/Berlin. Empty: the project's TIME_ZONE. Telegram does not "
                "tell the bot a user's own time zone.",
                max_length=64,
                validators=[botapp.models.settings.time_zone_validate],
                verbose_name="send window time zone",
            ),
        ),
        migrations.AddField(
            model_name="botsettings",
            name="optout_enabled",
            field=models.BooleanField(
                default=False,
                help_text="A button under every broadcast and sequence step: tapping it and confirming does what /stop does.",
                verbose_name="opt-out button",
            ),
        ),
        migrations.AddField(
            model_name="botsettings",
            name="optout_label",
            field=models.CharField(
                default="Unsubscribe",
                max_length=64,
                validators=[botapp.models.settings.button_label_validate],
                verbose_name="opt-out button text",
            ),
        ),
    ]
