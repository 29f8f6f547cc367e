from botapp.models import BroadcastDelivery, OutgoingSend, SendStatus, SequenceMessage

SHARED = ["chat_id", "status", "lease_until", "message_id", "sent_at", "error"]


def test_every_outgoing_send_has_the_shared_fields_and_only_its_own_statuses():
    assert issubclass(BroadcastDelivery, OutgoingSend) and issubclass(SequenceMessage, OutgoingSend)
    for model in (BroadcastDelivery, SequenceMessage):
        names = [f.name for f in model._meta.fields]
        assert names[1 : 1 + len(SHARED)] == SHARED
        status = model._meta.get_field("status")
        assert status.choices == model.Status.choices and status.default == "pending"
        # Labels are written once, in SendStatus.
        assert all(SendStatus(value).label == label for value, label in model.Status.choices)
    assert [s.value for s in BroadcastDelivery.Status] == [
        "pending",
        "sending",
        "sent",
        "skipped",
        "failed",
        "blocked",
        "interrupted",
        "deleted",
        "expired",
        "not_user",
    ]
    assert [s.value for s in SequenceMessage.Status] == ["pending", "sending", "sent", "skipped", "failed", "interrupted"]
    assert not hasattr(SequenceMessage.Status, "BLOCKED") and not hasattr(SequenceMessage.Status, "DELETED")


def test_the_status_field_is_a_plain_charfield_to_migrations():
    _, path, _, kwargs = BroadcastDelivery._meta.get_field("status").deconstruct()
    assert path == "django.db.models.CharField" and kwargs["max_length"] == 16
