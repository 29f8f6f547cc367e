from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from api.clients import apiclient_create


class Command(BaseCommand):
    help = "Create an HTTP API client and print its token (once: only its hash is kept)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--scopes", default="read", help="Comma-separated: read, write (default: read).")
        parser.add_argument("--rate", default="", help='Requests allowed, e.g. "600/min" (default: API_RATE).')

    def handle(self, *args, name, scopes, rate, **options):
        try:
            client, token = apiclient_create(name=name, scopes=scopes, rate=rate)
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from exc
        self.stderr.write(f"Created API client {client.name} (scopes: {client.scopes}). The token is shown once:")
        self.stdout.write(token)
