"""The sidebar's search: besides the theme's matching screens, a Telegram user by id, @username or
name, and a stored file by its share id (the part after start= in its link) or title; and a line
saying nothing was found when nothing was."""

from django.contrib import admin
from django.db.models import Q
from django.http import HttpResponse
from django.urls import reverse
from unfold.dataclasses import SearchResult

from botapp.models import StoredFile, TelegramUser

BIGINT_END = 2**63
SHOWN = 8  # records of each kind; the lists' own search finds the rest


def records_found(term: str, *, users_too: bool, files_too: bool) -> list[SearchResult]:
    """The users and stored files `term` names (those the operator may see), most exact first."""
    name = term.lstrip("@")
    if not users_too or not name:
        users = TelegramUser.objects.none()
    elif name.isdigit():
        if int(name) >= BIGINT_END:  # no Telegram id is that long (and PostgreSQL's bigint could not hold it)
            return []
        users = TelegramUser.objects.filter(telegram_id=int(name))
    else:
        users = TelegramUser.objects.filter(
            Q(username__iexact=name) | Q(first_name__istartswith=name) | Q(last_name__istartswith=name)
        ).order_by("-last_seen_at")
    files = StoredFile.objects.none()
    if files_too:
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
    found = records_found(
        term,
        users_too=request.user.has_perm("botapp.view_telegramuser"),
        files_too=request.user.has_perm("botapp.view_storedfile"),
    )
    response.context_data.update(results=[*found, *response.context_data["results"]], term=term)
    return response
