from django.contrib import admin

from .models import Environment


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    """Environments are recorded by validations; the admin reads them and may delete stale rows."""

    list_display = ["key", "python_version", "backend", "build_network", "repository", "package_count", "created_at"]
    list_filter = ["backend", "build_network", "python_version"]
    list_select_related = ["repository"]
    search_fields = ["key", "lock", "repository__name"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Environment._meta.fields]

    def has_add_permission(self, request):
        return False

    @admin.display(description="Packages")
    def package_count(self, obj):
        return obj.package_count
