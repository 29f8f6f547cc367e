from django.contrib import admin
from django.urls import include, path

from botapp import views
from botapp.admin import search, two_factor

urlpatterns = [
    path("health/", views.health, name="health"),
    path("metrics", views.metrics, name="metrics"),
    path("go/<str:token>/", views.go, name="go"),
    path("api/v1/", include(("api.urls", "api"), namespace="api")),
    path("", include("api.compat.urls")),  # the moved-in clients' paths (docs/api.md), before the console's catch-all
    path("login/verify/", two_factor.totp_verify, name="totp_verify"),  # before the console's own paths
    path("account/two-factor/", two_factor.totp_setup, name="totp_setup"),
    path("search/", admin.site.admin_view(search.console_search), name="console_search"),
    path("", admin.site.urls),
]

handler403 = "botapp.views.permission_denied"  # the console's frame; JSON under /api/
handler500 = "botapp.views.server_error"  # JSON under /api/
