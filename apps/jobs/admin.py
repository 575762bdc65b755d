from django.contrib import admin

from .models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "subject_label", "state", "progress_done", "progress_total", "worker", "created_at"]
    list_filter = ["kind", "state"]
    search_fields = ["subject_label", "error_message"]
    readonly_fields = [field.name for field in Job._meta.fields]
