"""Telegram users (ban, unban, reset verification, CSV export; what each one received, redeemed
and clicked) and their button clicks."""

import csv
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from unfold.contrib.filters.admin import FieldTextFilter
from unfold.decorators import action, display
from unfold.widgets import UnfoldAdminSelectWidget, UnfoldAdminTextInputWidget

from botapp import clock
from botapp.admin.base import InternalAdmin, ModelAdmin
from botapp.models import (
    ButtonClick,
    TelegramUser,
    UserBan,
)
from botapp.services.moderation import ban_in_force, ban_in_force_q, users_ban, users_unban
from botapp.services.users import users_verification_reset

# What Telegram tells us (and runbot keeps up to date): never typed by an operator.
TELEGRAM_FIELDS = ("telegram_id", "username", "first_name", "last_name", "language_code", "start_payload", "last_start_payload")
BAN_DAYS = 30
# The ban's lengths offered on a user's page ("" : until an admin lifts it, as /ban without a time).
BAN_LENGTHS = [("1", "1 day"), ("7", "7 days"), ("30", "30 days"), ("365", "1 year"), ("", "Until lifted")]
ACTIVITY_ROWS = 10  # per kind on a user's page; the rest through "all …"


class BanForm(forms.Form):
    days = forms.TypedChoiceField(
        label="For",
        choices=BAN_LENGTHS,
        initial="30",
        required=False,
        coerce=int,
        empty_value=None,
        widget=UnfoldAdminSelectWidget,
    )
    reason = forms.CharField(
        label="Reason",
        max_length=255,
        widget=UnfoldAdminTextInputWidget,
        help_text="Shown on the user's page and told to the user when they open a link (“Reason: …”).",
    )


def admin_ban_now() -> Exists:
    """The user has an admin ban in force (`/ban`, or *Ban* here): one subquery, no query per row."""
    return Exists(UserBan.objects.filter(ban_in_force_q(now=clock.now()), user=OuterRef("pk")))


class BannedFilter(admin.SimpleListFilter):
    """Either kind of ban in force: an admin's (`/ban`, *Ban* here) or a verification bypass's."""

    title = "banned"
    parameter_name = "banned"

    def lookups(self, request, model_admin):
        return [("yes", "Banned now"), ("admin", "By an admin"), ("bypass", "For a verification bypass"), ("no", "Not banned")]

    def queryset(self, request, queryset):
        admin_ban = Q(admin_banned=True) & Q(admin_ban_now())
        bypass = Q(banned_until__gt=clock.now())
        return {
            "yes": queryset.filter(admin_ban | bypass),
            "admin": queryset.filter(admin_ban),
            "bypass": queryset.filter(bypass),
            "no": queryset.exclude(admin_ban | bypass),
        }.get(self.value(), queryset)


class VerifiedFilter(admin.SimpleListFilter):
    title = "verified"
    parameter_name = "verified"

    def lookups(self, request, model_admin):
        return [("yes", "Verified now"), ("no", "Not verified")]

    def queryset(self, request, queryset):
        verified = Q(verified_until__gt=clock.now())
        return {"yes": queryset.filter(verified), "no": queryset.exclude(verified)}.get(self.value(), queryset)


class LastSeenFilter(admin.SimpleListFilter):
    title = "last seen"
    parameter_name = "seen"

    def lookups(self, request, model_admin):
        return [("1", "Today"), ("7", "In the last 7 days"), ("30", "In the last 30 days"), ("old", "More than 30 days ago")]

    def queryset(self, request, queryset):
        if self.value() == "old":
            return queryset.filter(last_seen_at__lt=clock.now() - timedelta(days=30))
        if self.value() == "1":
            return queryset.filter(last_seen_at__gte=clock.today_start())
        if self.value() in ("7", "30"):
            return queryset.filter(last_seen_at__gte=clock.now() - timedelta(days=int(self.value())))
        return queryset


@admin.register(TelegramUser)
class TelegramUserAdmin(ModelAdmin):
    """Users arrive by writing to the bot, never by hand: no Add. What Telegram says about them and
    the bot's own bookkeeping are read-only; an operator bans, unbans and resets verification."""

    list_display = ("telegram_id", "name", "state", "start_payload", "joined_at", "last_seen_at", "verified", "banned")
    list_filter = (
        "state",
        BannedFilter,
        VerifiedFilter,
        LastSeenFilter,
        ("start_payload", FieldTextFilter),
        "language_code",
        "joined_at",
    )
    list_filter_submit = True  # the payload filter is typed
    search_fields = ("=telegram_id", "username", "first_name", "last_name", "start_payload", "last_start_payload")
    search_help_text = "A Telegram id, @username, name or start payload."
    date_hierarchy = "joined_at"
    fieldsets = (
        (None, {"fields": (*TELEGRAM_FIELDS, "state", "joined_at", "last_seen_at")}),
        ("Access", {"fields": ("verified_until", "verification_count", "bypass_count", "banned_until")}),
        ("Premium and admin bans", {"fields": ("premium_until", "ban_shown")}),
        ("Activity", {"fields": ("activity",)}),
    )
    readonly_fields = (
        *TELEGRAM_FIELDS,
        "state",
        "joined_at",
        "last_seen_at",
        "verification_count",
        "bypass_count",
        "activity",
        "premium_until",
        "ban_shown",
    )
    actions = ("ban", "unban", "reset_verification", "export_csv")
    actions_detail = ("ban_user", "unban_user")
    list_per_page = 100

    def has_add_permission(self, request):
        return False

    def get_search_results(self, request, queryset, search_term):
        # Operators write usernames as Telegram shows them: "@alice".
        return super().get_search_results(request, queryset, search_term.strip().lstrip("@"))

    @display(description="name")
    def name(self, obj):
        full = " ".join(filter(None, [obj.first_name, obj.last_name]))
        return f"{full} (@{obj.username})" if obj.username else full or "—"

    # Words, not ✓ and ✗: a green tick for "banned" and a red cross for "not banned" read backwards.
    @display(description="verified", label={"verified": "success"})
    def verified(self, obj):
        return "verified" if obj.verified_until and obj.verified_until > clock.now() else ""

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(admin_ban_now=admin_ban_now())

    @display(description="banned", label={"banned": "danger"})
    def banned(self, obj):
        """An admin ban or a verification-bypass ban in force: "banned" in red; nothing otherwise."""
        return "banned" if getattr(obj, "admin_ban_now", False) or (obj.banned_until and obj.banned_until > clock.now()) else ""

    @display(description="admin ban")
    def ban_shown(self, obj):
        """The ban in force: until when, why, by whom (Ban… and Unban… above change it)."""
        if obj is None or not obj.pk:
            return "—"
        ban = ban_in_force(user=obj)
        if ban is None:
            return "Not banned."
        until = f"until {timezone.localtime(ban.until):%Y-%m-%d %H:%M %Z}" if ban.until else "until lifted"
        by = f"by admin {ban.banned_by}" if ban.banned_by else "from the console"
        reason = f" Reason: {ban.reason}" if ban.reason else " No reason given."
        return f"Banned {until}, {by}, since {timezone.localtime(ban.created_at):%Y-%m-%d %H:%M}.{reason}"

    @staticmethod
    def _user(object_id) -> TelegramUser:
        if not str(object_id).isdigit():  # the action URLs take any path: /1/change/ban/ is no user
            raise Http404("No such user.")
        return get_object_or_404(TelegramUser, pk=object_id)

    def _user_page_form(self, request, user, *, title, lines, button, form=None, danger=False):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "lines": lines,
            "button": button,
            "form": form or (),
            "telegram_user": user,
            "danger": danger,
        }
        return TemplateResponse(request, "admin/botapp/user_ban.html", context)

    @action(description="Ban…", url_path="ban", icon="block", permissions=["change"])
    def ban_user(self, request, object_id):
        """Ban this user for a chosen time with a reason (a GET shows the form, a POST bans)."""
        user = self._user(object_id)
        form = BanForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            days = form.cleaned_data["days"]
            n, admins, longer = users_ban(
                users=[user], duration=timedelta(days=days) if days else None, reason=form.cleaned_data["reason"]
            )
            if admins:
                self.message_user(request, "Admins cannot be banned (ADMIN_IDS): left as they were.", messages.ERROR)
            elif longer:
                self.message_user(request, "Already banned for longer: left as they were.", messages.INFO)
            else:
                how_long = f"for {dict(BAN_LENGTHS)[str(days)]}" if days else "until lifted"
                self.message_user(request, f"Banned {user} {how_long}.", messages.WARNING)
            return redirect("admin:botapp_telegramuser_change", user.pk)
        return self._user_page_form(
            request,
            user,
            title=f"Ban {user}",
            lines=["A banned user gets no files from links, as with the bot's /ban; the ban shows on their page."],
            button="Ban",
            form=form,
            danger=True,
        )

    @action(description="Unban…", url_path="unban", icon="lock_open", permissions=["change"])
    def unban_user(self, request, object_id):
        user = self._user(object_id)
        if request.method == "POST":
            n = users_unban(users=[user])
            self.message_user(request, f"Unbanned {user}." if n else f"{user} was not banned.")
            return redirect("admin:botapp_telegramuser_change", user.pk)
        return self._user_page_form(
            request,
            user,
            title=f"Unban {user}",
            lines=["Lifts the admin ban and a verification-bypass ban, if either is in force: links work for them again."],
            button="Unban",
        )

    @display(description="what they got")
    def activity(self, obj):
        """The user's deliveries, tokens, clicks and sequence messages, newest first, each with a
        link to all of them."""
        if obj is None or not obj.pk:
            return "—"
        q = {"q": obj.telegram_id}
        kinds = [
            ("Broadcasts received", obj.broadcast_deliveries.select_related("broadcast").order_by("-id"), "broadcastdelivery"),
            ("Verification tokens", obj.tokens.order_by("-created_at"), "verificationtoken"),
            ("Button clicks", obj.clicks.order_by("-last_clicked_at"), "buttonclick"),
            ("Sequence messages", obj.sequence_messages.select_related("step__sequence").order_by("-due_at"), "sequencemessage"),
        ]
        sections = []
        for title, rows, model in kinds:
            count = rows.count()
            url = reverse(f"admin:botapp_{model}_changelist") + f"?q={q['q']}"
            sections.append({"title": title, "rows": list(rows[:ACTIVITY_ROWS]), "count": count, "url": url, "kind": model})
        return render_to_string("admin/botapp/user_activity.html", {"sections": sections})

    @action(description=f"Ban for {BAN_DAYS} days (as /ban: no files)", permissions=["change"])
    def ban(self, request, queryset):
        # No reason: the banned user is shown a ban's reason, and the operator's log-in name is no
        # reason and not theirs to see; who banned is on the audit trail.
        n, admins, longer = users_ban(users=queryset.order_by("pk"), duration=timedelta(days=BAN_DAYS), reason="")
        self.message_user(request, f"Banned {n} user(s) for {BAN_DAYS} days.", messages.WARNING)
        if admins:
            names = ", ".join(str(u.telegram_id) for u in admins)
            self.message_user(request, f"Admins cannot be banned (ADMIN_IDS): {names} left as they were.", messages.ERROR)
        if longer:
            names = ", ".join(str(u.telegram_id) for u in longer)
            self.message_user(request, f"Already banned for longer: {names} left as they were.", messages.INFO)

    @action(description="Unban (admin and bypass bans)", permissions=["change"])
    def unban(self, request, queryset):
        n = users_unban(users=queryset.order_by("pk"))
        self.message_user(request, f"Unbanned {n} user(s).")

    @action(description="Reset verification (verify again for the next file)", permissions=["change"])
    def reset_verification(self, request, queryset):
        n = users_verification_reset(user_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"{n} user(s) must verify again.")

    @action(description="Export as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="telegram-users-{clock.today():%Y-%m-%d}.csv"'
        columns = [*TELEGRAM_FIELDS, "state", "joined_at", "last_seen_at", "verified_until", "banned_until", "bypass_count"]
        writer = csv.writer(response)
        writer.writerow(columns)
        for row in queryset.order_by("id").values_list(*columns).iterator():
            writer.writerow([csv_cell(v) for v in row])
        return response


def csv_cell(value) -> object:
    """One exported value. Names and payloads come from Telegram users: a text a spreadsheet would
    read as a formula (=, +, -, @, tab, carriage return first) is prefixed with a quote (OWASP's advice
    on CSV injection), so opening the export runs nothing."""
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@admin.register(ButtonClick)
class ButtonClickAdmin(InternalAdmin):
    list_display = ("user", "button", "count", "clicked_at", "last_clicked_at")
    list_filter = ("button", "clicked_at")
    search_fields = ("=user__telegram_id", "user__username", "button")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
