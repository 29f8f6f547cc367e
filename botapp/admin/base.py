"""What every screen of the console shares: the theme's ModelAdmin (django-unfold), and the
read-only base for the tables the bot and the jobs write (an operator looks at them, and deletes
where that is safe)."""

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.html import format_html
from django.utils.safestring import SafeString
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.admin import StackedInline as UnfoldStackedInline
from unfold.admin import TabularInline as UnfoldTabularInline

from botapp.services.audit import audit_current, audit_record


class ModelAdmin(UnfoldModelAdmin):
    """The console's ModelAdmin: warns before leaving a changed form, and puts what its forms add,
    change and delete on the audit trail (botapp/services/audit.py), unless a service the request
    called recorded it already (an action, or an API client made through its service)."""

    warn_unsaved_form = True

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        return bounds_from_validators(db_field, super().formfield_for_dbfield(db_field, request, **kwargs))

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


def bounds_from_validators(db_field, formfield):
    """A number field's bounds as its model's validators set them: the browser's own check (the
    input's min and max) then says what the form would say. Without this a PositiveIntegerField
    that must be at least 1 let the browser say "≥ 0" for -5, then the form "≥ 1" for 0."""
    if not isinstance(formfield, forms.IntegerField):
        return formfield
    for validator in db_field.validators:
        if isinstance(validator, MinValueValidator) and (
            formfield.min_value is None or validator.limit_value > formfield.min_value
        ):
            formfield.min_value = validator.limit_value
            formfield.widget.attrs["min"] = validator.limit_value
        if isinstance(validator, MaxValueValidator) and (
            formfield.max_value is None or validator.limit_value < formfield.max_value
        ):
            formfield.max_value = validator.limit_value
            formfield.widget.attrs["max"] = validator.limit_value
    return formfield


def readonly_text(contents: SafeString) -> SafeString:
    """A read-only text field (already escaped by the theme) with its line breaks kept."""
    return format_html('<div class="readonly-text">{}</div>', contents)


class StackedInline(UnfoldStackedInline):
    def formfield_for_dbfield(self, db_field, request, **kwargs):
        return bounds_from_validators(db_field, super().formfield_for_dbfield(db_field, request, **kwargs))


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
