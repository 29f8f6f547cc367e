"""Autovacuum for broadcast deliveries: every send updates its row twice (pending → sending → sent)
and neither update can be HOT (status is in the partial indexes' predicates), so a large
broadcast leaves two dead row versions per user and their index entries. PostgreSQL's default
vacuums a table after 20 % of it is dead, and until then the sender's claim walks the dead entries
of `delivery_pending`, slower with every send. Here a vacuum follows every 1 % (+10,000 rows), often
while a broadcast is sent, and the planner's statistics keep up with a table that grows by millions
at a time."""

from django.db import migrations

TABLE = "botapp_broadcastdelivery"
SETTINGS = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "10000",
    "autovacuum_vacuum_insert_scale_factor": "0.01",
    "autovacuum_analyze_scale_factor": "0.02",
}


class Migration(migrations.Migration):
    dependencies = [("botapp", "0017_broadcast_prepare")]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE {TABLE} SET ({', '.join(f'{k} = {v}' for k, v in SETTINGS.items())})",
            reverse_sql=f"ALTER TABLE {TABLE} RESET ({', '.join(SETTINGS)})",
        ),
    ]
