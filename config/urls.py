from django.contrib import admin
from django.urls import path

from botapp import views

urlpatterns = [
    path("health/", views.health, name="health"),
    path("go/<str:token>/", views.go, name="go"),
    path("", admin.site.urls),
]
