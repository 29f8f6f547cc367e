"""The in-memory Telegram: a model of Telegram that kurigram's real client talks to over MTProto,
below kurigram's Connection, as moto answers boto3 below its HTTP. Tests, the sandbox and the
benchmarks run against it; production never imports it.

It depends on the standard library, kurigram's public modules (`pyrogram.raw`, `pyrogram.file_id`,
`pyrogram.crypto`) and its own modules, never on Courier's code: a model that shared the product's
numbers or types would hide the product's mistakes. Whoever builds it gives it a clock
(`TelegramServer(now=...)`). Start reading at server.py.
"""
