"""Courier's data, one module per capability. Every future action is a row with a due time and a
status (docs/architecture.md, "Scheduled work: durable rows, swept"); each index names the query it serves."""

from botapp.models.access import ChannelJoinRequest, CounterEntry, DailyStat, DailyTokenCount, ForceSubChannel, VerificationToken
from botapp.models.allow_list import AllowedUser
from botapp.models.audit import AuditEntry
from botapp.models.broadcasts import Broadcast, BroadcastAttachment, BroadcastClaim, BroadcastDelivery
from botapp.models.files import (
    TELEGRAM_DELETE_WINDOW_MINUTES,
    AlbumClaim,
    ClaimStatus,
    PendingBatch,
    PendingDeletion,
    RemovedFile,
    StoredFile,
    share_id_new,
)
from botapp.models.growth import (
    GrowthCount,
    Notice,
    RedeemCode,
    RedeemThrottle,
    Redemption,
    Referral,
    ReferralCode,
    VerificationProgress,
)
from botapp.models.outgoing import OutgoingSend, SendStatus
from botapp.models.posts_commands import KeptChannelPost, PostsCommand
from botapp.models.premium import AdminCommand, PremiumPlan, UserBan
from botapp.models.sequences import Sequence, SequenceMessage, SequenceStep
from botapp.models.settings import BotSettings
from botapp.models.subscribers import Subscriber, SubscriberMessage
from botapp.models.updates import HandledUpdate, UpdatePosition
from botapp.models.users import ButtonClick, TelegramUser

__all__ = [
    "AllowedUser",
    "AuditEntry",
    "AdminCommand",
    "AlbumClaim",
    "PremiumPlan",
    "UserBan",
    "BotSettings",
    "Broadcast",
    "BroadcastAttachment",
    "BroadcastClaim",
    "BroadcastDelivery",
    "ButtonClick",
    "ChannelJoinRequest",
    "ClaimStatus",
    "CounterEntry",
    "DailyStat",
    "DailyTokenCount",
    "ForceSubChannel",
    "GrowthCount",
    "Notice",
    "RedeemCode",
    "RedeemThrottle",
    "Redemption",
    "Referral",
    "ReferralCode",
    "VerificationProgress",
    "HandledUpdate",
    "KeptChannelPost",
    "OutgoingSend",
    "PendingBatch",
    "PendingDeletion",
    "PostsCommand",
    "RemovedFile",
    "SendStatus",
    "Sequence",
    "SequenceMessage",
    "SequenceStep",
    "StoredFile",
    "Subscriber",
    "SubscriberMessage",
    "TELEGRAM_DELETE_WINDOW_MINUTES",
    "TelegramUser",
    "UpdatePosition",
    "VerificationToken",
    "share_id_new",
]
