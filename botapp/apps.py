from django.apps import AppConfig
from django.db import transaction
from django.db.models.signals import post_delete, post_save


class BotappConfig(AppConfig):
    name = "botapp"
    verbose_name = "Courier bot"

    def ready(self):
        from botapp.models import Sequence, SequenceStep

        for model in (Sequence, SequenceStep):
            post_save.connect(_sequence_steps_changed, sender=model, dispatch_uid=f"steps-saved-{model.__name__}")
            post_delete.connect(_sequence_steps_changed, sender=model, dispatch_uid=f"steps-deleted-{model.__name__}")


def _sequence_steps_changed(**kwargs) -> None:
    """runbot caches the enabled sequences' steps (botapp.services.sequences): forget them now, and
    again once the change is committed (a reader between the two would cache the old rows)."""
    from botapp.services.sequences import sequence_steps_forget

    sequence_steps_forget()
    transaction.on_commit(sequence_steps_forget)
