"""Admin for tasks: read-mostly. States move through services, which record every change."""

from django.contrib import admin

from .models import CurationSettings, EnvironmentAttempt, RejectReason, Task, TaskStateChange, TestRunRecord, Validation


class TaskStateChangeInline(admin.TabularInline):
    model = TaskStateChange
    fields = ["at", "from_state", "to_state", "reason", "actor"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["instance_id", "repository", "state", "reason", "created_at", "updated_at"]
    list_filter = ["state", "reason", "repository"]
    list_select_related = ["repository"]
    search_fields = ["instance_id", "commit__sha", "commit__message"]
    readonly_fields = ["instance_id", "repository", "commit", "state", "reason", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    inlines = [TaskStateChangeInline]

    def has_add_permission(self, request):
        return False


@admin.register(TaskStateChange)
class TaskStateChangeAdmin(admin.ModelAdmin):
    list_display = ["task", "from_state", "to_state", "reason", "actor", "at"]
    list_filter = ["to_state", "reason"]
    list_select_related = ["task", "actor"]
    search_fields = ["task__instance_id"]
    date_hierarchy = "at"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in TaskStateChange._meta.fields]

    def has_add_permission(self, request):
        return False


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class EnvironmentAttemptInline(_ReadOnlyInline):
    model = EnvironmentAttempt
    fields = ["strategy", "status", "step", "seconds", "commands", "output"]
    readonly_fields = fields


class TestRunRecordInline(_ReadOnlyInline):
    model = TestRunRecord
    fields = ["side", "scope", "index", "status", "exit_code", "collection_error", "seconds", "outcomes", "output"]
    readonly_fields = fields


@admin.register(Validation)
class ValidationAdmin(admin.ModelAdmin):
    """Validations are written by the worker; here they are only read."""

    list_display = ["task", "state", "verdict", "reason", "environment", "environment_reused", "seconds", "created_at"]
    list_filter = ["job__state", "verdict", "reason", "backend", "environment_reused"]
    list_select_related = ["task", "environment", "job"]
    search_fields = ["task__instance_id", "environment__key"]
    date_hierarchy = "created_at"
    inlines = [EnvironmentAttemptInline, TestRunRecordInline]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Validation._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# --- curation: admins manage the reasons and the review rules -------------------------------------


@admin.register(RejectReason)
class RejectReasonAdmin(admin.ModelAdmin):
    list_display = ["code", "sentence", "active", "order"]
    list_editable = ["sentence", "active", "order"]


@admin.register(CurationSettings)
class CurationSettingsAdmin(admin.ModelAdmin):
    list_display = ["__str__", "required_reviews", "underspecified_below", "false_negative_below", "hold_minutes"]

    def has_add_permission(self, request):
        return not CurationSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False
