"""Click keys: the names under which buttons record clicks (a tracked link's third part, a tap
button's `tap:key`; botapp/models/buttons.py). A sequence step's condition looks at one; a key no
button records can never be clicked, so such a condition would never skip anyone."""

from collections.abc import Iterable

from django.core.exceptions import ValidationError

from botapp.models import BotSettings, Broadcast, ButtonClick, SequenceStep
from botapp.models.buttons import button_specs, buttons_parse


def click_keys_of(*, button_texts: Iterable[str]) -> set[str]:
    """The keys the buttons written in these texts record (a text that does not parse records none)."""
    keys: set[str] = set()
    for text in button_texts:
        try:
            rows = buttons_parse(text=text or "", check_links=False)
        except ValidationError:
            continue
        keys.update(spec.key for spec in button_specs(rows=rows) if spec.key)
    return keys


def click_key_recorded(*, key: str, button_texts: Iterable[str] = ()) -> bool:
    """Whether some button records clicks on `key`: one in `button_texts` (the form being saved),
    a sequence step's, a broadcast's, the welcome's; or clicks on it are stored already (imported
    from another bot). Texts are read only where the key appears in them."""
    if key in click_keys_of(button_texts=button_texts):
        return True
    candidates = [
        *SequenceStep.objects.filter(buttons__contains=key).values_list("buttons", flat=True),
        *Broadcast.objects.filter(buttons__contains=key).values_list("buttons", flat=True)[:100],
        BotSettings.load().welcome_buttons,
    ]
    if key in click_keys_of(button_texts=candidates):
        return True
    return ButtonClick.objects.filter(button=key).exists()
