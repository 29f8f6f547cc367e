"""The operator console, one module per capability. Thin: lists, filters and forms; writes go
through services."""

from django.contrib import admin

from botapp.admin import (  # noqa: F401 - registers the admins
    access,
    allow_list,
    audit,
    broadcasts,
    files,
    growth,
    posts_commands,
    premium,
    sequences,
    settings,
    site,
    subscribers,
    updates,
    users,
)

admin.site.site_header = "Courier"
admin.site.site_title = "Courier"
admin.site.index_title = "Dashboard"
