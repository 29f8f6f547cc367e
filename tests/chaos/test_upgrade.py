"""An upgrade with the previous release's processes still running (issue 46): its runbot and two
workers, run from that release's code (`git archive` of RELEASE into var/, the same virtualenv),
on a database at that release's migrations; a broadcast and 200 `/start <file>` under way; then
`migrate` to HEAD, as the release step does before the restarts (docs/operating.md, "Upgrading").
The old processes go on on the new schema: the rest of the broadcast, the other 100 `/start`, an
admin storing a file (an insert that names none of the columns added since), the due deletions.
Then the upgrade ends: every process restarts on HEAD. 0 errors in the old processes' logs, each
user served once (Telegram's count). Processes of its own: those of HEAD would be started only to
be stopped (conftest, CLUSTER_PROCESSES)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from botapp.models import StoredFile
from botapp.services.broadcasts import broadcast_start
from botapp.services.files import file_store
from botapp.telegram.gateway import TgUser
from tests.chaos.cluster import TABLE, Figures, wait_for
from tests.chaos.work import SETTLE_TIMEOUT, audit, calls, check, fire, mark, recover, users
from tests.conftest import ADMIN, STORAGE
from tests.factories import BroadcastFactory

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The previous release: the last commit before migration 0031 (botapp 0030, scheduler 0002). The
# migrations since are those tests/test_migrations_upgrade.py holds to the rule.
RELEASE = "a083718"
RELEASE_MIGRATION = ("botapp", "0030_posts_command_public_channel")
CLUSTER_PROCESSES: tuple[str, ...] = ()  # this module starts the release's
MIGRATE_AT = 0.3  # the share of the broadcast's sends Telegram has received when `migrate` runs
# What an error looks like in a process's log (Django's and Celery's formats, and a traceback).
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback ", re.MULTILINE)


# Tooling, not the release: the connection to the in-memory Telegram (under kurigram) and the
# socket protocol it speaks are HEAD's, so that the release's processes talk to the same Telegram as
# the suite (its HELLO names the bot since; its frames are read with HEAD's buffer).
TOOLING = ("offline/telegram/connection.py", "inmemory_telegram/protocol.py")


def release_tree() -> Path:
    """RELEASE's code under var/ with HEAD's TOOLING (made once, kept for the next run)."""
    base = Path(settings.BASE_DIR)
    tree = base / "var" / f"release-{RELEASE}"
    if not (tree / "manage.py").exists():
        part = tree.with_name(tree.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(base), "archive", RELEASE], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(part)], input=archive.stdout, check=True)
        part.rename(tree)
    for path in TOOLING:
        shutil.copyfile(base / path, tree / path)
    return tree


def test_the_previous_release_runs_through_migrate_during_a_broadcast_and_200_file_requests(cluster):
    figures = Figures("previous release's worker and runbot through migrate to HEAD mid-broadcast and 200 /start <file>")
    TABLE.append(figures)
    tree = release_tree()
    n, base = 3000, 21_000_000
    text = "Upgrade file"
    share = file_store(source_chat_id=STORAGE, message_ids=[cluster.remote.post(STORAGE, text)], title="upgrade").share_id
    users(cluster, base, n)
    started = BroadcastFactory(title="upgrade", text="Upgrade broadcast")

    call_command("migrate", *RELEASE_MIGRATION, verbosity=0)  # the schema the release runs on
    cluster.workers.cwd = tree
    for name in ("bot", "w1", "w2"):
        cluster.workers.start(name)
    since = mark(cluster)
    assert broadcast_start(broadcast=started) == n
    fire(cluster, "send_broadcasts")
    askers = [TgUser(id=base + 100_000 + i, first_name=f"Asker{i}") for i in range(200)]
    for user in askers[:100]:
        cluster.remote.user_sends(user, f"/start {share}")
    wait_for(lambda: calls(cluster, since=since) >= n * MIGRATE_AT, timeout=120, what="the broadcast to get going", interval=0.05)

    call_command("migrate", verbosity=0)  # HEAD's, while the release's processes run on
    migrated = time.monotonic()
    for user in askers[100:]:
        cluster.remote.user_sends(user, f"/start {share}")
    cluster.remote.user_sends(TgUser(id=ADMIN, first_name="Admin"), "", media={"kind": "document", "file": "upgrade.pdf"})
    wait_for(lambda: StoredFile.objects.count() == 2, timeout=60, what="the release's runbot to store the admin's file")
    asked = {u.id for u in askers}
    wait_for(
        lambda: len(set(cluster.remote.received(text=text)) & asked) == len(askers),
        timeout=SETTLE_TIMEOUT, what="every /start answered", interval=0.2,
    )  # fmt: skip
    recover(cluster, figures, migrated, "send_broadcasts", "delete_due_messages")  # deletions due: made due now
    errors = {name: ERROR_LINE.findall(cluster.workers.log_of(name)) for name in ("bot", "w1", "w2")}

    # The upgrade ends: every process restarts on HEAD, and serves on.
    cluster.workers.stop()
    cluster.workers.cwd = Path(settings.BASE_DIR)
    for name in ("bot", "w1", "w2"):
        cluster.workers.start(name)
    late = TgUser(id=base + 99_999, first_name="Late")
    cluster.remote.user_sends(late, f"/start {share}")
    wait_for(lambda: cluster.remote.received(text=text).get(late.id), timeout=60, what="HEAD's runbot to serve")

    audit(cluster, figures)
    copies = cluster.remote.received(text=text)
    twice = sorted(u for u in [*asked, late.id] if copies.get(u, 0) > 1)
    got = cluster.remote.received(text=started.text)
    figures.rows += len(askers)
    figures.sends += sum(copies.get(u, 0) for u in asked)
    figures.duplicates += len(twice)
    figures.note = (
        f"release {RELEASE} on botapp {RELEASE_MIGRATION[1][:4]}, migrate to HEAD at {MIGRATE_AT:.0%} of the broadcast: "
        f"{sum(got.get(u, 0) for u in range(base, base + n)):,} of {n:,} users got it, 200 /start answered, the admin's file "
        f"stored by the old runbot; errors in the old logs: {sum(map(len, errors.values()))}; then HEAD's processes served on"
    )
    assert not twice, f"served twice: {twice[:5]}"
    assert errors == {"bot": [], "w1": [], "w2": []}, {k: v[:3] for k, v in errors.items()}
    check(figures)
    assert figures.interrupted == 0, figures
