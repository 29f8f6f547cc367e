"""Broadcast deliveries lose the index of their broadcast_id alone: the unique (broadcast, user)
index starts with it and serves every lookup by broadcast (the cascade of a deleted broadcast
included), and cost space in every row and an index write per row made. Only the index is dropped:
Django's AlterField would also drop and re-add the foreign key, re-checking every row."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "botapp_broadcastdelivery_broadcast_id_4058500d"


class Migration(migrations.Migration):
    dependencies = [("botapp", "0018_delivery_autovacuum")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="broadcastdelivery",
                    name="broadcast",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="botapp.broadcast",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "botapp_broadcastdelivery" ("broadcast_id")',
                ),
            ],
        ),
    ]
