from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0010_broadcast_skipped_interrupted"),
    ]

    operations = [
        migrations.AddField(
            model_name="pendingdeletion",
            name="notice_due",
            field=models.BooleanField(default=True, help_text='Send the "deleted" notice after deleting.'),
        ),
    ]
