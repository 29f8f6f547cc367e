"""The streaming origin's addresses (ROOT_URLCONF of config/settings_stream.py): nothing of the console."""

from django.urls import path

from botapp.stream import views

urlpatterns = [
    path("f/<str:token>", views.file_bytes, name="stream_file"),
    # The file's name after the token is for players that read the type from the address; it is ignored.
    path("f/<str:token>/<path:name>", views.file_bytes, name="stream_file_named"),
    path("watch/<str:token>", views.watch, name="stream_watch"),
    path("assets/<str:name>", views.asset, name="stream_asset"),
]

handler404 = "botapp.stream.views.not_found"
