from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0014_deletion_delivery_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="pendingdeletion",
            name="notice_from",
            field=models.DateTimeField(
                blank=True, help_text='First attempt of the "deleted" notice whose outcome is unknown.', null=True
            ),
        ),
    ]
