"""What every screen of the console shares: the theme's ModelAdmin, and the read-only base for the
tables the bot and the jobs write (an operator looks at them, and deletes where that is safe)."""

from django.contrib import admin


class ModelAdmin(admin.ModelAdmin):
    """The console's ModelAdmin (the theme's, once installed)."""


class InternalAdmin(ModelAdmin):
    """A table the bot or a job writes: never added or edited by hand. `deletable` says whether an
    operator may delete rows (only where nothing depends on them: a deleted delivery would lose the
    message id its deletion needs)."""

    deletable = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return self.deletable and super().has_delete_permission(request, obj)
