"""`manage.py retry_never_written`: once, after upgrading to the Courier that reaches users with no
stored access hash, try again the sequence steps and broadcast deliveries an earlier Courier
settled as "has never written to the bot" (botapp/services/reach.py)."""

from django.core.management.base import BaseCommand

from botapp.services.reach import never_written_retry


class Command(BaseCommand):
    help = 'Send again, once, what was recorded "has never written to the bot: no access hash".'

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count them, write nothing")

    def handle(self, *args, dry_run=False, **options):
        done = never_written_retry(dry_run=dry_run)
        verb = "would be sent again" if dry_run else "pending again"
        return f"{done.steps} sequence steps and {done.deliveries} broadcast deliveries (of {done.broadcasts} broadcasts) {verb}"
