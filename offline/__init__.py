"""Tooling beside the product, never imported by it: the harness that puts Courier's real kurigram
clients on the in-memory Telegram (`offline.telegram`: the client's connection, offline gateways
and runbot, the remote control of `manage.py telegram_server`) and the sandbox (`manage.py
sandbox`). The in-memory Telegram itself is a package of its own, `inmemory_telegram`.

Production code reaches it only through settings: with TELEGRAM_OFFLINE=1, runbot and workers build
their kurigram client with `offline.telegram.connection.offline_client_options`, named in
config/settings.py (TELEGRAM_OFFLINE_CONNECTION), as boto3 is pointed at moto by an endpoint URL.
"""
