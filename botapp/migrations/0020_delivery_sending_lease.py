"""Broadcast deliveries: one partial index of the rows being sent, (broadcast, lease_until) WHERE
status = 'sending', in place of two (broadcast) and (lease_until) with the same condition. Every
claimed row is a non-HOT update (status is in the indexes' conditions) that writes an entry into each
index whose condition it meets: one entry fewer per claimed row. The queries both served still use
it: "is the broadcast done?" (by broadcast) and the reaper's (lease_until < now, a walk of this small
index); tests/scheduler/test_delivery_indexes.py checks their plans. The claim is faster for it.

Built concurrently under a new name, the two old ones dropped, then renamed: no write to the table is
held up while the index is built, and the "done" check always has an index."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY

    dependencies = [("botapp", "0019_delivery_broadcast_index")]

    operations = [
        AddIndexConcurrently(
            model_name="broadcastdelivery",
            index=models.Index(
                condition=models.Q(("status", "sending")), fields=["broadcast", "lease_until"], name="delivery_sending_new"
            ),
        ),
        RemoveIndexConcurrently(model_name="broadcastdelivery", name="delivery_sending"),
        RemoveIndexConcurrently(model_name="broadcastdelivery", name="delivery_lease"),
        migrations.RenameIndex(model_name="broadcastdelivery", new_name="delivery_sending", old_name="delivery_sending_new"),
    ]
