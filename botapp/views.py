from django.db import connection
from django.http import HttpResponseNotFound, HttpResponseRedirect, JsonResponse
from django.views.decorators.http import require_GET

from botapp.services.outgoing import click_record


def health(request):
    """For load balancers and uptime checks: 200 when the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any database failure means "not healthy"
        return JsonResponse({"status": "error", "database": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})


@require_GET
def go(request, token: str):
    """A tracked button: record the click, then send the user on to the link."""
    target = click_record(token)
    if target is None:
        return HttpResponseNotFound("This link is not valid.")
    return HttpResponseRedirect(target)
