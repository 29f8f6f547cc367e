"""Deleting a broadcast from the console: refused while its messages are still in chats or being
sent (the service says why), confirmed with a count of its deliveries instead of a list of them."""

from django.contrib import messages

from botapp.models import Broadcast
from botapp.services.broadcasts import broadcast_delete_refusal


class BroadcastDeletion:
    """The delete hooks of BroadcastAdmin (mixed in before ModelAdmin). It expects `_back(broadcast)`,
    BroadcastAdmin's way back to a broadcast's page."""

    def has_delete_permission(self, request, obj=None):
        if obj is not None and broadcast_delete_refusal(broadcast=obj):
            return False
        return super().has_delete_permission(request, obj)

    def delete_view(self, request, object_id, extra_context=None):
        broadcast = Broadcast.objects.filter(pk=object_id).first()
        if broadcast is not None and (reason := broadcast_delete_refusal(broadcast=broadcast)):
            self.message_user(request, f"“{broadcast.title}” cannot be deleted yet: {reason}", messages.ERROR)
            return self._back(broadcast)
        return super().delete_view(request, object_id, extra_context)

    def get_deleted_objects(self, objs, request):
        """Its deliveries go with it: the confirmation counts them instead of listing every row
        (and needs no permission to delete deliveries, which the console never deletes alone)."""
        objs = list(objs)
        counts = {b.pk: n for b, n in ((b, b.deliveries.count()) for b in objs)}
        summary = [f"{b.title}: the broadcast and its {counts[b.pk]:,} delivery records" for b in objs]
        model_count = {"broadcasts": len(objs), "broadcast deliveries": sum(counts.values())}
        return summary, model_count, set(), []

    def delete_queryset(self, request, queryset):
        refused = [b for b in queryset if broadcast_delete_refusal(broadcast=b)]
        if refused:
            self.message_user(request, f"Not deleted (messages still in chats or being sent): {', '.join(map(str, refused))}.")
        queryset.exclude(pk__in=[b.pk for b in refused]).delete()
