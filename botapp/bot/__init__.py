"""The conversation: what the bot answers. `router.py` takes domain updates (from
botapp/telegram/updates.py), parses commands and payloads, calls services and replies through the
gateway; `admin_commands.py` holds the commands only ADMIN_IDS may use. No business rules, no SQL."""
