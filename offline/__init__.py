"""Tooling beside the product, never imported by it: the in-memory Telegram (`offline.telegram`,
raw MTProto under kurigram, as moto answers boto3) and the sandbox (`manage.py sandbox`).

Production code reaches it only through settings: with TELEGRAM_OFFLINE=1, runbot and workers build
their kurigram client with `offline.telegram.connection.offline_client_options`, named in
config/settings.py (TELEGRAM_OFFLINE_CONNECTION), as boto3 is pointed at moto by an endpoint URL.
"""
