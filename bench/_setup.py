"""Django set-up for the bench scripts (run from the repository root: python bench/<name>.py).

Benchmarks run production settings: DEBUG=0, PostgreSQL and Redis (the defaults below are the
bench database and Redis db 15; DATABASE_URL / REDIS_URL override them).
"""

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/courier_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    raise SystemExit("bench: DEBUG is on; benchmarks run production settings (DEBUG=0)")


def spread(values, fmt="{:,.1f}"):
    """min / median / max of a few runs, formatted."""
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))
