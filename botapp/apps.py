from django.apps import AppConfig
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from botapp import checks  # noqa: F401 - registers the system checks
from botapp.runtime import gc_tune


class BotappConfig(AppConfig):
    name = "botapp"
    verbose_name = "Courier bot"

    def ready(self):
        # here: models load once the app registry is ready, after this module
        from botapp.models import ForceSubChannel, Sequence, SequenceStep

        for model in (Sequence, SequenceStep):
            post_save.connect(_sequence_steps_changed, sender=model, dispatch_uid=f"steps-saved-{model.__name__}")
            post_delete.connect(_sequence_steps_changed, sender=model, dispatch_uid=f"steps-deleted-{model.__name__}")
        post_save.connect(_force_sub_changed, sender=ForceSubChannel, dispatch_uid="force-sub-saved")
        post_delete.connect(_force_sub_changed, sender=ForceSubChannel, dispatch_uid="force-sub-deleted")
        gc_tune()  # every Courier process: see botapp/runtime.py


def _sequence_steps_changed(**kwargs) -> None:
    """runbot caches the enabled sequences' steps (botapp.services.sequences): forget them now, and
    again once the change is committed (a reader between the two would cache the old rows)."""
    from botapp.services.sequences import sequence_steps_forget  # here: services import models, not ready yet at import

    sequence_steps_forget()
    transaction.on_commit(sequence_steps_forget)


def _force_sub_changed(**kwargs) -> None:
    """runbot caches the enabled force-subscribe channels (botapp.services.invites): as above."""
    from botapp.services.invites import force_sub_forget  # here: services import models, not ready yet at import

    force_sub_forget()
    transaction.on_commit(force_sub_forget)
