"""Django set-up for the bench scripts (run from the repository root: python bench/<name>.py)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")

import django  # noqa: E402

django.setup()
