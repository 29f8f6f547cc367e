"""The moved-in clients' paths (api/compat/views.py), mounted before the console in config/urls.py.

Seed 003's paths answer at the root as its clients call them, and all of them, its root `/` too,
under LEGACY_API_PREFIX (default `legacy`): `/` is the console's own, and a client whose base URL
has a path keeps every call under it. A trailing slash is optional (the old API redirected it).
Seed 004's statistics answer at their own path.
"""

import re

from django.conf import settings
from django.urls import re_path

from api.compat import views

SEED003 = (
    ("schedule-message", views.ScheduleMessageView),
    ("subscribe-user", views.SubscribeUserView),
    ("pending-messages", views.PendingMessagesView),
    ("subscribed-users", views.SubscribedUsersView),
)


def compat_urlpatterns(*, prefix: str) -> list:
    """The patterns for a LEGACY_API_PREFIX; with an empty one seed 003's root is served nowhere
    (`/` stays the console's)."""
    patterns = [re_path(rf"^{path}/?$", view.as_view(), name=f"compat-{path}") for path, view in SEED003]
    patterns.append(
        re_path(r"^api/messages/scheduler/stats/?$", views.SchedulerStatsView.as_view(), name="compat-scheduler-stats")
    )
    prefix = re.escape(prefix.strip("/"))
    if prefix:
        patterns += [re_path(rf"^{prefix}/{path}/?$", view.as_view()) for path, view in SEED003]
        patterns += [
            re_path(rf"^{prefix}/?$", views.RootView.as_view(), name="compat-root"),
            re_path(rf"^{prefix}/", views.NotFoundView.as_view()),  # anything else there: a JSON 404
        ]
    return patterns


urlpatterns = compat_urlpatterns(prefix=settings.LEGACY_API_PREFIX)
