"""Who may call the HTTP API: one row per client, holding its token's hash, never the token."""

from django.db import models

from botapp import clock


class ApiClient(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "Read (GET)"
        WRITE = "write", "Write (POST, PATCH)"

    name = models.CharField(max_length=64, unique=True, help_text="Who uses it (a system or a person).")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)  # SHA-256 of the token, hex
    token_prefix = models.CharField(max_length=12, editable=False, help_text="The token's first characters, to recognise it.")
    scopes = models.CharField(max_length=64, default="read", help_text="Comma-separated: read, write.")
    rate = models.CharField(
        max_length=32, blank=True, help_text='Requests allowed, e.g. "600/min"; empty: API_RATE for every client.'
    )
    created_at = models.DateTimeField(default=clock.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Set: the token is refused.")

    class Meta:
        verbose_name = "API client"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # What DRF asks of request.user: a client that authenticated is an authenticated caller.
    is_authenticated = True
    is_anonymous = False

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(s.strip() for s in self.scopes.split(",") if s.strip())
