"""The streaming process's ASGI application (`manage.py stream` runs it under uvicorn). Its
settings are always config.settings_stream: a DJANGO_SETTINGS_MODULE left in the environment must
never put the console's pages on the files' origin."""

import os

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings_stream"
django.setup(set_prefix=False)

from botapp.stream.app import StreamApp  # noqa: E402 - after django.setup(): the app registry must be ready

application = StreamApp()
