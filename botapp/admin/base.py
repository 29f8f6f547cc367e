"""What every screen of the console shares: the theme's ModelAdmin (django-unfold), and the
read-only base for the tables the bot and the jobs write (an operator looks at them, and deletes
where that is safe)."""

from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.admin import StackedInline as UnfoldStackedInline
from unfold.admin import TabularInline as UnfoldTabularInline


class ModelAdmin(UnfoldModelAdmin):
    """The console's ModelAdmin: warns before leaving a changed form."""

    warn_unsaved_form = True


class StackedInline(UnfoldStackedInline):
    pass


class TabularInline(UnfoldTabularInline):
    pass


class InternalAdmin(ModelAdmin):
    """A table the bot or a job writes: never added or edited by hand (every read-only screen of
    the console is one). `deletable` says whether an operator may delete rows (only where nothing
    depends on them: a deleted delivery would lose the message id its deletion needs)."""

    deletable = False
    warn_unsaved_form = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return self.deletable and super().has_delete_permission(request, obj)
