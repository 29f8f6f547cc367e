from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.authentication import SessionAuthentication
from rest_framework.routers import SimpleRouter

from api import allow_list, views
from api.authentication import BearerAuthentication, SchemaAccess
from api.redeem_codes import RedeemCodeViewSet

router = SimpleRouter()
router.register("messages", views.MessageViewSet, basename="message")
router.register("users", views.UserViewSet, basename="user")
router.register("files", views.FileViewSet, basename="file")
router.register("broadcasts", views.BroadcastViewSet, basename="broadcast")
router.register("redeem-codes", RedeemCodeViewSet, basename="redeem-code")
router.register("allowed-users", allow_list.AllowedUserViewSet, basename="alloweduser")

# The schema and the docs: a client's token (read scope), or staff signed in to the admin with the
# API permission (SchemaAccess).
schema_access = {
    "authentication_classes": [BearerAuthentication, SessionAuthentication],
    "permission_classes": [SchemaAccess],
}

urlpatterns = [
    path("scheduler/stats/", views.SchedulerStatsView.as_view(), name="scheduler-stats"),
    path("schema/", SpectacularAPIView.as_view(**schema_access), name="schema"),
    # The split view serves Swagger UI's start-up script from a URL (?script): no inline script,
    # which the Content-Security-Policy (config/csp.py) refuses.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema", **schema_access), name="docs"),
    path("", views.ApiRootView.as_view(), name="root"),
    path("", include(router.urls)),
    re_path(r"^.*$", views.NotFoundView.as_view(), name="not-found"),  # last: anything else is a JSON 404
]
