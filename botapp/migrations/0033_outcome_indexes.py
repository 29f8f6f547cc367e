"""Two partial indexes of settled rows, for the console's one-line "why" (services/outcomes.py): a
broadcast's failed deliveries by error, and the sequence messages failed, interrupted or skipped by
due time (the dashboard's last 24 h). Built concurrently: no write to either table is held up."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY

    dependencies = [("botapp", "0032_growth")]

    operations = [
        AddIndexConcurrently(
            model_name="broadcastdelivery",
            index=models.Index(condition=models.Q(("status", "failed")), fields=["broadcast", "error"], name="delivery_failed"),
        ),
        AddIndexConcurrently(
            model_name="sequencemessage",
            index=models.Index(
                condition=models.Q(("status__in", ["failed", "skipped", "interrupted"])), fields=["due_at"], name="seqmsg_unsent"
            ),
        ),
    ]
