"""Bots and people on one in-memory Telegram (inmemory_telegram/accounts.py, core._caller_set): a key
is signed in to one bot or one person's account, or to nothing yet, and each may call only what it
may; a person's access hashes are their own, as each bot's are (ACCOUNT_BOUND_FILES)."""

import asyncio

import pytest
from pyrogram import errors, raw

from botapp.telegram.user_session import user_client_build
from offline.telegram.clients import offline_downloader

PHONE = "+15550002222"
PUBLIC = -1001777000111
USERNAME = "publicposts"


def test_a_key_is_signed_in_to_one_bot_or_one_person_and_each_calls_only_its_own(telegram, tmp_path):
    telegram.create_channel(PUBLIC, title="Public", username=USERNAME)
    telegram.account_add(PHONE, 4343, first_name="Person")

    async def refused(client, query) -> str:
        with pytest.raises(errors.RPCError) as caught:
            await client.invoke(query)
        return caught.value.ID

    async def main():
        person = user_client_build(api_id=1, api_hash="0" * 32, workdir=tmp_path, offline=telegram)
        bot = offline_downloader(telegram)
        await person.connect()
        await bot.start()
        try:
            found = {"before sign-in": await refused(person, raw.functions.contacts.ResolveUsername(username=USERNAME))}
            sent = await person.send_code(PHONE)
            me = await person.sign_in(PHONE, sent.phone_code_hash, telegram.login_code(PHONE))
            found["signed in as"] = me.id
            resolved = await person.invoke(raw.functions.contacts.ResolveUsername(username=USERNAME))
            theirs = resolved.chats[0].access_hash
            channel = raw.types.InputChannel(channel_id=resolved.chats[0].id, access_hash=0)
            ours = (await bot.client.invoke(raw.functions.channels.GetChannels(id=[channel]))).chats[0].access_hash
            found["hashes differ"] = theirs != ours
            found["person with the bot's hash"] = await refused(
                person, raw.functions.messages.GetHistory(
                    peer=raw.types.InputPeerChannel(channel_id=channel.channel_id, access_hash=ours),
                    offset_id=0, offset_date=0, add_offset=0, limit=10, max_id=0, min_id=0, hash=0,
                ),
            )  # fmt: skip
            channel.access_hash = theirs
            found["bot with the person's hash"] = await refused(bot.client, raw.functions.channels.GetChannels(id=[channel]))
            found["bot signing in a person"] = await refused(
                bot.client, raw.functions.auth.SendCode(
                    phone_number=PHONE, api_id=1, api_hash="0" * 32, settings=raw.types.CodeSettings()
                ),
            )  # fmt: skip
            found["person reading files"] = await refused(
                person, raw.functions.upload.GetFile(
                    location=raw.types.InputDocumentFileLocation(id=1, access_hash=0, file_reference=b"", thumb_size=""),
                    offset=0, limit=4096,
                ),
            )  # fmt: skip
            return found
        finally:
            await bot.stop()
            await person.disconnect()

    assert asyncio.run(asyncio.wait_for(main(), timeout=60)) == {
        "before sign-in": "AUTH_KEY_UNREGISTERED",
        "signed in as": 4343,
        "hashes differ": True,
        "person with the bot's hash": "CHANNEL_INVALID",
        "bot with the person's hash": "CHANNEL_INVALID",
        "bot signing in a person": "BOT_METHOD_INVALID",
        "person reading files": "INPUT_METHOD_INVALID",
    }
