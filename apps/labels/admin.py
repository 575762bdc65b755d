from django.contrib import admin

from .models import Label, LabelSettings, Settlement


class ReadOnly(admin.ModelAdmin):
    """Labels and settlements are given on the labelling pages, each kept with who and when: the admin
    reads them (a wrong one is settled, never edited)."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Label)
class LabelAdmin(ReadOnly):
    list_display = ["candidate", "annotator", "dataset", "verdict", "confidence", "control", "seconds", "created_at"]
    list_filter = ["verdict", "control", "order", "dataset"]
    list_select_related = ["candidate__task", "annotator", "dataset"]
    search_fields = ["candidate__task__instance_id", "annotator__username", "rationale"]
    date_hierarchy = "created_at"


@admin.register(Settlement)
class SettlementAdmin(ReadOnly):
    list_display = ["candidate", "verdict", "settled_by", "created_at"]
    list_select_related = ["candidate__task", "settled_by"]
    search_fields = ["candidate__task__instance_id", "note"]


@admin.register(LabelSettings)
class LabelSettingsAdmin(admin.ModelAdmin):
    """Curators change these on a dataset's labels page; the admin shows them."""

    list_display = ["dataset", "overlap", "control_share", "order", "hide_trajectory", "updated_at"]
    readonly_fields = ["queue_fingerprint", "updated_at"]
