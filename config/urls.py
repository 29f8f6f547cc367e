from django.contrib import admin
from django.urls import include, path

from botapp import views

urlpatterns = [
    path("health/", views.health, name="health"),
    path("metrics", views.metrics, name="metrics"),
    path("go/<str:token>/", views.go, name="go"),
    path("api/v1/", include(("api.urls", "api"), namespace="api")),
    path("", include("api.compat.urls")),  # the moved-in clients' paths (docs/api.md), before the console's catch-all
    path("", admin.site.urls),
]

handler500 = "botapp.views.server_error"  # JSON under /api/
