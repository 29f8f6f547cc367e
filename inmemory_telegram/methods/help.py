"""help.*: the configuration a client asks for when it connects."""

from __future__ import annotations

from pyrogram import raw

from inmemory_telegram import limits, render
from inmemory_telegram.methods.common import (
    Table,
    now_ts,
)

METHODS = Table()


@METHODS.method("help.GetConfig")
def get_config(server, query):
    return raw.types.Config(
        date=now_ts(server),
        expires=now_ts(server) + 3600,
        test_mode=False,
        this_dc=render.DC_ID,
        dc_options=[raw.types.DcOption(id=dc, ip_address="127.0.0.1", port=443) for dc in limits.DCS],
        dc_txt_domain_name="offline",
        chat_size_max=200,
        megagroup_size_max=200000,
        forwarded_count_max=limits.IDS_PER_CALL,
        online_update_period_ms=210000,
        offline_blur_timeout_ms=5000,
        offline_idle_timeout_ms=30000,
        online_cloud_timeout_ms=300000,
        notify_cloud_delay_ms=30000,
        notify_default_delay_ms=1500,
        push_chat_period_ms=60000,
        push_chat_limit=2,
        edit_time_limit=172800,
        revoke_time_limit=int(limits.DELETE_WINDOW.total_seconds()),
        revoke_pm_time_limit=int(limits.DELETE_WINDOW.total_seconds()),
        rating_e_decay=2419200,
        stickers_recent_limit=200,
        channels_read_media_period=604800,
        call_receive_timeout_ms=20000,
        call_ring_timeout_ms=90000,
        call_connect_timeout_ms=30000,
        call_packet_timeout_ms=10000,
        me_url_prefix="https://t.me/",
        caption_length_max=limits.CAPTION_LENGTH,
        message_length_max=limits.TEXT_LENGTH,
        webfile_dc_id=4,
    )
