"""The sidebar's search: besides the theme's matching screens, a Telegram user by id, @username or
name, and a stored file by its share id (the part after start= in its link) or title; and a line
saying nothing was found when nothing was."""

from django.contrib import admin
from django.db.models import Q
from django.http import HttpResponse
from django.urls import reverse
from unfold.dataclasses import SearchResult

from botapp.models import StoredFile, TelegramUser

SHOWN = 8  # records of each kind; the lists' own search finds the rest


def records_found(term: str) -> list[SearchResult]:
    """The users and stored files `term` names, most exact first."""
    name = term.lstrip("@")
    users = TelegramUser.objects.none()
    if name.isdigit():
        users = TelegramUser.objects.filter(telegram_id=int(name))
    elif name:
        users = TelegramUser.objects.filter(
            Q(username__iexact=name) | Q(first_name__istartswith=name) | Q(last_name__istartswith=name)
        ).order_by("-last_seen_at")
    files = StoredFile.objects.filter(Q(share_id=term) | Q(title__icontains=term)).order_by("-created_at")
    return [
        *(
            SearchResult(
                title=str(u),
                description="Telegram user",
                link=reverse("admin:botapp_telegramuser_change", args=[u.pk]),
                icon="person",
            )
            for u in users[:SHOWN]
        ),
        *(
            SearchResult(
                title=f"{f.title or 'untitled'} (start={f.share_id})",
                description="Stored file",
                link=reverse("admin:botapp_storedfile_change", args=[f.pk]),
                icon="folder",
            )
            for f in files[:SHOWN]
        ),
    ]


def console_search(request):
    """What the sidebar's search box shows under it as the operator types (htmx)."""
    term = (request.GET.get("s") or "").strip()
    if not term:
        return HttpResponse()
    response = admin.site.search(request)  # the theme's: screens whose names match
    response.template_name = "admin/search_results.html"
    found = records_found(term) if request.user.has_perm("botapp.view_telegramuser") else []
    response.context_data.update(results=[*found, *response.context_data["results"]], term=term)
    return response
