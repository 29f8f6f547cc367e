"""What every screen of the console shares: the theme's ModelAdmin (django-unfold), and the
read-only base for the tables the bot and the jobs write (an operator looks at them, and deletes
where that is safe)."""

from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.admin import StackedInline as UnfoldStackedInline
from unfold.admin import TabularInline as UnfoldTabularInline

from botapp.services.audit import audit_current, audit_record


class ModelAdmin(UnfoldModelAdmin):
    """The console's ModelAdmin: warns before leaving a changed form, and puts what its forms add,
    change and delete on the audit trail (botapp/services/audit.py), unless a service the request
    called recorded it already (an action, or an API client made through its service)."""

    warn_unsaved_form = True

    def log_addition(self, request, obj, message):
        entry = super().log_addition(request, obj, message)
        _audit_console_change("add", obj, entry.get_change_message())
        return entry

    def log_change(self, request, obj, message):
        entry = super().log_change(request, obj, message)
        _audit_console_change("change", obj, entry.get_change_message())
        return entry

    def log_deletions(self, request, queryset):
        for obj in queryset:  # before the deletion, as Django logs it
            _audit_console_change("delete", obj, "")
        return super().log_deletions(request, queryset)


def _audit_console_change(verb: str, obj, detail: str) -> None:
    context = audit_current()
    if context is not None and context.recorded and verb != "delete":
        return  # the service the form called put it on the trail already
    audit_record(action=f"{obj._meta.model_name}.{verb}", target=obj, detail=detail)


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
