"""Broadcast claims: a sender leases a range of a broadcast's delivery rows with one BroadcastClaim
row instead of setting every row `sending` (a non-HOT update of every row of the batch, with its
WAL records and four index entries a row: most of the claim's time in PostgreSQL). The rows stay
`pending`.

Only adds a table. Senders of the code before it still set rows `sending` (the reaper settles those
as before), but they do not know the claims: an old worker could take rows a new one has claimed
(the same random_id: delivered once, counted twice). docs/operating.md says to stop the other
hosts' workers before this upgrade."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("botapp", "0020_delivery_sending_lease"),
    ]

    operations = [
        migrations.CreateModel(
            name="BroadcastClaim",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("first_id", models.BigIntegerField()),
                ("last_id", models.BigIntegerField()),
                ("claimed_at", models.DateTimeField()),
                ("lease_until", models.DateTimeField()),
                (
                    "broadcast",
                    models.ForeignKey(
                        db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="claims", to="botapp.broadcast"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["broadcast", "first_id"], name="claim_range"),
                    models.Index(fields=["lease_until"], name="claim_lease"),
                ],
            },
        ),
    ]
