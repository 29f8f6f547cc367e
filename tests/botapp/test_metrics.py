"""/metrics: what runbot, the workers and the web counted, added up across processes (prometheus
multiprocess mode), and the database's queues read at the scrape; refused without the token."""

from datetime import timedelta

import pytest
from django.test import Client
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families

from botapp import clock
from botapp.metrics import ALL
from botapp.telegram.gateway import TgUser
from tests.factories import BroadcastFactory, telegram_on_socket
from tests.processes import manage, manage_env

TOKEN = "scrape-token-0123456789"


@pytest.fixture
def multiprocess_dir(tmp_path, monkeypatch, settings):
    """PROMETHEUS_MULTIPROC_DIR for the processes this test starts and for this one (runbot and
    the web here): prometheus_client picks its file-backed values when a value is first made, so
    this process's are made afresh in the folder."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    for metric in ALL:
        metric.clear()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue())
    settings.METRICS_TOKEN = TOKEN
    yield directory
    monkeypatch.undo()
    for metric in ALL:
        metric.clear()  # back to this process's own values once the folder is gone


def scrape(client: Client, **headers) -> dict:
    """{(name, labels as a sorted tuple): value} of a scrape with the token."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_scrape_adds_up_runbot_the_workers_and_the_queues(
    multiprocess_dir, telegram, bot, chat, conf, sender_wakeups, tmp_path
):
    from botapp.models import PendingDeletion
    from botapp.services.broadcasts import broadcast_start

    clock.clock_reset()  # the workers below run on real time
    users = [TgUser(id=2001 + n, first_name=f"User{n}") for n in range(3)]
    for user in users:
        chat(user, "/start")  # runbot (this process) answers
    broadcast = BroadcastFactory(text="Hello everyone")
    broadcast_start(broadcast=broadcast)
    for user in users:  # the welcome messages are due for deletion a minute ago
        (welcome,) = telegram.bot_messages(user.id)
        PendingDeletion.objects.create(
            chat_id=user.id, message_ids=[welcome.id], delete_at=clock.now() - timedelta(minutes=1), notice_due=False
        )
    web = Client()

    before = scrape(web)

    assert before[("courier_backlog_rows", (("queue", "broadcast_deliveries"),))] == 3
    assert before[("courier_backlog_rows", (("queue", "deletions"),))] == 3
    assert before[("courier_backlog_oldest_late_seconds", (("queue", "deletions"),))] >= 60
    assert before[("courier_update_handling_seconds_count", (("kind", "IncomingMessage"),))] == 3

    with telegram_on_socket(telegram) as socket_path:
        env = manage_env(
            TELEGRAM_OFFLINE="1", TELEGRAM_OFFLINE_SOCKET=str(socket_path), TELEGRAM_SESSION_DIR=str(tmp_path / "sessions")
        )
        for job in ("send_broadcasts", "delete_due_messages"):  # two worker processes
            result = manage(job, env=env)
            assert result.returncode == 0, result.stdout + result.stderr

    after = scrape(web)

    assert telegram.received(text="Hello everyone") == {u.id: 1 for u in users}
    assert after[("courier_sends_total", (("kind", "broadcast"), ("result", "sent")))] == 3
    assert after[("courier_sends_total", (("kind", "deletion"), ("result", "deleted")))] == 3
    for job in ("send_broadcasts", "delete_due_messages"):
        assert after[("courier_job_runs_total", (("job", job), ("result", "ok")))] == 1
        assert after[("courier_job_run_duration_seconds_count", (("job", job),))] == 1
    assert after[("courier_limiter_wait_seconds_count", (("lane", "bulk"),))] >= 1  # the workers' sends waited for slots
    assert after[("courier_update_handling_seconds_count", (("kind", "IncomingMessage"),))] == 3
    assert after[("courier_backlog_rows", (("queue", "broadcast_deliveries"),))] == 0
    assert after[("courier_backlog_rows", (("queue", "deletions"),))] == 0
    assert after[("courier_backlog_oldest_late_seconds", (("queue", "deletions"),))] == 0
    pids = {path.stem.rsplit("_", 1)[1] for path in multiprocess_dir.glob("*.db")}
    assert len(pids) == 3  # this process (runbot, web) and the two workers each wrote their counts


def test_a_flood_wait_and_a_limiter_wait_are_counted(multiprocess_dir, prefix, db):
    import redis
    from django.conf import settings

    from botapp.telegram.limiter import BULK, RedisLimiter

    slept = []
    limiter = RedisLimiter(redis.Redis.from_url(settings.REDIS_URL), rate=30, prefix=prefix, lane=BULK, sleep=slept.append)

    limiter.pause(7, chat_id=None)
    limiter.acquire(None)

    samples = scrape(Client())
    assert samples[("courier_flood_waits_total", (("lane", "bulk"),))] == 1
    assert samples[("courier_flood_wait_seconds_total", (("lane", "bulk"),))] == 7
    assert samples[("courier_limiter_wait_seconds_count", (("lane", "bulk"),))] == 1
    assert samples[("courier_limiter_wait_seconds_sum", (("lane", "bulk"),))] == pytest.approx(sum(slept))
    assert sum(slept) > 6  # it waited the pause out


def test_a_request_without_the_token_is_refused(multiprocess_dir, db):
    web = Client()

    assert web.get("/metrics").status_code == 401
    assert web.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert web.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_an_allowed_address_needs_no_token(multiprocess_dir, settings, db):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.0.0.5"]
    web = Client()

    assert web.get("/metrics", REMOTE_ADDR="10.0.0.5").status_code == 200
    assert web.get("/metrics", REMOTE_ADDR="10.0.0.6").status_code == 401


def test_metrics_are_off_unless_enabled(settings, db):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []

    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


def test_enabled_without_a_multiprocess_folder_says_so(settings, monkeypatch, db):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    settings.METRICS_TOKEN = TOKEN

    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 503
    assert b"PROMETHEUS_MULTIPROC_DIR" in response.content


def test_the_sample_dashboard_charts_only_metrics_that_exist():
    import json
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|count|sum)$", "", name) for e in exprs for name in re.findall(r"\bcourier_[a-z_]+", e)}
    counted = {m._name + ("_total" if m._type == "counter" else "") for m in ALL}

    assert used == counted | {"courier_backlog_rows", "courier_backlog_oldest_late_seconds"}
