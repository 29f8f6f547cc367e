"""Campaign payloads, returning users, /stop and retired commands, as a Telegram user sees them."""

import importlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.urls import reverse

import botapp.migrations
from botapp import clock
from botapp.models import BotSettings, RemovedFile, SequenceMessage, StoredFile, TelegramUser
from botapp.models.files import share_id_new
from botapp.services.delivery import FILE_LINK_RE, NO_FILE
from botapp.services.files import file_store
from botapp.services.legacy import legacy_share_id
from botapp.services.subscribers import subscriber_create
from botapp.telegram.gateway import TgUser
from scheduler.jobs.registry import job_run
from tests.factories import PendingDeletionFactory, SequenceFactory, VerificationTokenFactory

pytestmark = pytest.mark.django_db

WELCOME = "Hello Alice! I deliver files shared through my links."
BACK = "Welcome back, Alice!"
BOB = TgUser(id=2002, first_name="Bob")


@pytest.fixture
def campaign():
    """A sequence for everyone and one for the `campaign_x` payload only."""
    everyone = SequenceFactory(name="Everyone")
    everyone.steps.create(delay_seconds=600, text="For everyone")
    tagged = SequenceFactory(name="Campaign X", start_payload="campaign_x")
    tagged.steps.create(delay_seconds=60, text="Campaign X, step 1")
    tagged.steps.create(delay_seconds=1800, text="Campaign X, step 2")
    return tagged


def step_texts(user_id):
    return sorted(SequenceMessage.objects.filter(user__telegram_id=user_id).values_list("step__text", flat=True))


def sent_steps(telegram, user_id):
    return [m.text for m in telegram.bot_messages(user_id) if m.text.startswith(("For everyone", "Campaign X"))]


def test_a_campaign_payload_gets_the_welcome_and_its_sequences(chat, alice, conf, campaign):
    assert [e.text for e in chat(alice, "/start campaign_x")] == [WELCOME]

    assert step_texts(alice.id) == ["Campaign X, step 1", "Campaign X, step 2", "For everyone"]
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.start_payload, user.last_start_payload) == ("campaign_x", "campaign_x")


@pytest.mark.parametrize("payload", ["campaign_x", "spring", "a", "x" * 64, "Ad-2024_07"])
def test_any_payload_that_is_not_a_file_link_is_a_campaign_tag(chat, alice, conf, payload):
    assert [e.text for e in chat(alice, f"/start {payload}")] == [WELCOME]


def test_the_link_of_a_file_removed_in_the_console_says_so(chat, alice, conf, stored, admin_client, plain_http):
    url = reverse("admin:botapp_storedfile_delete", args=[stored.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert [e.text for e in chat(alice, f"/start {stored.share_id}")] == [NO_FILE]
    assert not SequenceMessage.objects.exists()


def test_files_removed_together_in_the_console_keep_saying_so(chat, alice, conf, stored, admin_client, plain_http):
    other = file_store(source_chat_id=stored.source_chat_id, message_ids=[1])
    admin_client.post(
        reverse("admin:botapp_storedfile_changelist"),
        {"action": "delete_selected", "post": "yes", "_selected_action": [stored.pk, other.pk]},
    )
    assert not StoredFile.objects.exists()
    for share_id in (stored.share_id, other.share_id):
        assert [e.text for e in chat(alice, f"/start {share_id}")] == [NO_FILE]


def test_a_legacy_shaped_payload_that_matches_nothing_is_a_removed_file(chat, alice, conf):
    assert [e.text for e in chat(alice, "/start lgAbCdEfGhIjKlMn")] == [NO_FILE]


@pytest.mark.parametrize(
    "payload",
    # The new share id gets a name: its value differs in each process collecting it (pytest-xdist's workers).
    ["fb_ad_123456", "google_ads_7", "tiktok-ad-99", pytest.param(share_id_new(), id="a-new-share-id")],
)
def test_an_ad_payload_shaped_like_a_share_id_gets_the_welcome_and_is_recorded(chat, alice, conf, payload):
    """The drip bot's ads link to /start fb_ad_123456 (shared/seeds/002: start_payload): 12
    characters, as this bot's share ids. No file ever had it, so it is a campaign tag."""
    assert [e.text for e in chat(alice, f"/start {payload}")] == [WELCOME]
    assert chat(alice, f"/start {payload}")[0].text == BACK
    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.start_payload, user.last_start_payload) == (payload, payload)


def test_the_file_link_shape_is_the_shape_of_the_links_this_bot_makes(settings):
    assert all(FILE_LINK_RE.match(share_id_new()) for _ in range(200))
    assert FILE_LINK_RE.match(legacy_share_id(channel_id=-1001234567890, message_ids=[5, 6]))
    assert not FILE_LINK_RE.match("campaign_x")


def test_a_sequence_may_target_a_payload_shaped_like_a_file_link(chat, alice, conf):
    tag = "summer_2025x"  # 12 characters, like a share id
    SequenceFactory(start_payload=tag).steps.create(delay_seconds=300, text="Summer")

    assert [e.text for e in chat(alice, f"/start {tag}")] == [WELCOME]
    assert step_texts(alice.id) == ["Summer"]


def test_a_stored_file_wins_over_a_campaign_of_the_same_name(chat, alice, conf, stored):
    SequenceFactory(start_payload=stored.share_id).steps.create(delay_seconds=300, text="Same name")
    assert [e.action for e in chat(alice, f"/start {stored.share_id}")][:2] == ["copy", "copy"]


def test_a_returning_user_gets_welcome_back_and_no_second_sequence(chat, alice, conf, campaign):
    chat(alice, "/start")
    assert [e.text for e in chat(alice, "/start")] == [BACK]
    assert [e.text for e in chat(alice, "/start campaign_x")] == [BACK]

    assert step_texts(alice.id) == ["Campaign X, step 1", "Campaign X, step 2", "For everyone"]  # once each
    assert [e.text for e in chat(alice, "/start campaign_x")] == [BACK]
    assert SequenceMessage.objects.filter(user__telegram_id=alice.id).count() == 3


def test_a_returning_user_with_a_new_payload_has_it_recorded_and_its_sequence_starts_from_now(chat, alice, conf, campaign):
    chat(alice, "/start spring")
    clock.clock_advance(timedelta(hours=5))

    assert [e.text for e in chat(alice, "/start campaign_x")] == [BACK]

    user = TelegramUser.objects.get(telegram_id=alice.id)
    assert (user.start_payload, user.last_start_payload) == ("spring", "campaign_x")
    first = SequenceMessage.objects.get(user=user, step__text="Campaign X, step 1")
    assert abs(first.due_at - (clock.now() + timedelta(minutes=1))) < timedelta(seconds=5)  # not joined_at + 1 min


def test_welcome_back_is_a_bot_setting(chat, alice, conf):
    conf.welcome_back_text = "Good to see you again, {first_name}."
    conf.save()
    chat(alice, "/start")
    assert [e.text for e in chat(alice, "/start")] == ["Good to see you again, Alice."]


@pytest.mark.django_db(transaction=True)  # the sender's pool threads read users runbot stored
def test_stop_cancels_pending_steps_for_good_and_start_brings_back_broadcasts_only(
    chat, alice, telegram, gateway, conf, campaign
):
    chat(alice, "/start campaign_x")
    chat(BOB, "/start campaign_x")
    clock.clock_advance(timedelta(minutes=2))
    job_run("send_sequence_messages", trigger="test", gateway=gateway)
    assert sent_steps(telegram, alice.id) == ["Campaign X, step 1"]

    answer = chat(alice, "/stop")[0].text
    assert "cancelled for good" in answer and "/start" in answer
    assert [e.text for e in chat(alice, "/start campaign_x")] == [BACK]
    assert TelegramUser.objects.get(telegram_id=alice.id).state == "active"  # broadcasts reach them again
    clock.clock_advance(timedelta(hours=1))
    for _ in range(3):
        job_run("send_sequence_messages", trigger="test", gateway=gateway)

    assert sent_steps(telegram, alice.id) == ["Campaign X, step 1"]  # nothing replayed
    assert sent_steps(telegram, BOB.id) == ["Campaign X, step 1", "For everyone", "Campaign X, step 2"]
    cancelled = SequenceMessage.objects.filter(user__telegram_id=alice.id, status="skipped")
    assert sorted(cancelled.values_list("step__text", "error")) == [
        ("Campaign X, step 2", "cancelled by /stop"),
        ("For everyone", "cancelled by /stop"),
    ]


def test_retired_commands_answer_with_their_note(chat, alice, conf):
    assert chat(alice, "/send")[0].text.startswith("/send is no longer available.")
    assert chat(alice, "/SEND@CourierBot hello")[0].text.startswith("/send is no longer available.")

    conf.retired_commands = "/send | Use the channel instead.\n\n/genre|Genres are gone: browse the channel."
    conf.save()
    assert chat(alice, "/send")[0].text == "Use the channel instead."
    assert chat(alice, "/genre")[0].text == "Genres are gone: browse the channel."
    assert chat(alice, "/nonsense")[0].text.startswith("I did not understand")


def test_a_live_command_is_never_shadowed_by_a_retired_one(chat, alice, conf):
    conf.retired_commands = "/help | retired?"
    conf.save()
    assert chat(alice, "/help")[0].text == conf.help_text


@pytest.fixture
def operator(admin_client, settings, plain_http):
    return admin_client


def settings_form_post(operator, **changes):
    url = reverse("admin:botapp_botsettings_change", args=[BotSettings.load().pk])
    form = operator.get(url).context["adminform"].form
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in form.initial.items()}
    data.pop("shortener_api_key", None)
    return operator.post(url, data | changes)


def test_the_operator_edits_welcome_back_and_retired_commands_on_the_settings_page(operator):
    response = settings_form_post(operator, welcome_back_text="Hi again {first_name}", retired_commands="/old | Gone.")
    assert response.status_code == 302
    conf = BotSettings.load()
    assert (conf.welcome_back_text, conf.retired_command_note("old")) == ("Hi again {first_name}", "Gone.")


def test_the_settings_page_refuses_a_retired_command_it_cannot_read(operator):
    response = settings_form_post(
        operator, welcome_back_text="Hi {firstname}", retired_commands="/ok | fine\nsend without a slash | note"
    )
    errors = response.context["adminform"].form.errors
    assert errors["retired_commands"] == [
        'Line 2: write "/command | the note it answers with" (e.g. "/send | /send is retired").'
    ]
    assert errors["welcome_back_text"][0].startswith("{firstname} is not a placeholder")
    response = settings_form_post(operator, retired_commands="/ok | <b>unclosed")
    assert response.context["adminform"].form.errors["retired_commands"] == ["/ok: <b> is never closed."]


def test_the_welcome_shows_the_user_their_id_as_the_scheduled_message_system_did(operator, chat, alice, conf):
    """Seed 003's /start told the user their user_id and chat_id: {id}, {chat_id} and {user_id}
    are placeholders the settings page takes and the bot fills, escaped like the names."""
    text = "Hi {first_name}: your id is {id}, chat {chat_id}, user {user_id}."
    assert settings_form_post(operator, welcome_text=text, welcome_back_text="Back: {user_id}").status_code == 302

    assert [e.text for e in chat(alice, "/start")] == ["Hi Alice: your id is 1001, chat 1001, user 1001."]
    subscriber_create(chat_id=alice.id, chat_name="Alice", subscriber_id="660e9511-f39c <b>")
    assert [e.text for e in chat(alice, "/start")] == ["Back: 660e9511-f39c <b>"]  # escaped: shown as written, not as bold


def test_files_removed_before_the_upgrade_are_found_from_the_rows_that_named_them(stored):
    """The migration that brought RemovedFile keeps the links of files removed before it "removed"
    when a deletion or a token still names them (found by name: the lead may renumber it)."""
    (path,) = Path(botapp.migrations.__file__).parent.glob("*_removed_files.py")
    migration = importlib.import_module(f"botapp.migrations.{path.stem}")
    PendingDeletionFactory(share_id="GoneFile1234")
    VerificationTokenFactory(share_id="GoneToo12345")
    PendingDeletionFactory(share_id=stored.share_id)
    PendingDeletionFactory(share_id="")

    migration.removed_files_found(django_apps, None)

    assert set(RemovedFile.objects.values_list("share_id", flat=True)) == {"GoneFile1234", "GoneToo12345"}
