"""Admin for repositories and mining. Credentials are write-only here too: the encrypted
fields are never in a form or a list, only whether some are stored."""

from django import forms
from django.contrib import admin, messages
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from . import services
from .forms import LocationInput, RepositoryRegisterChecks, WriteOnlyTextarea
from .models import Commit, MiningJob, Repository
from .secrets import secret_encrypt


class RepositoryAddForm(RepositoryRegisterChecks, forms.ModelForm):
    """Register by URL or local path through `services.repository_register`, like the web form.

    The admin saves a form only if it validated, so the service runs as the last step of
    validation (inside the admin's transaction): a refusal is an error on its field, and
    `save()` hands back the repository the service made."""

    location = forms.CharField(max_length=1000, widget=LocationInput(attrs={"size": 80}),
                               help_text="A URL or a local path; a token in the URL is stored as a secret.")
    name = forms.CharField(max_length=200, required=False,
                           help_text="owner/name, used in task ids. Empty: taken from the location.")
    ssh_key = forms.CharField(label="SSH private key", required=False, strip=False, widget=WriteOnlyTextarea,
                              help_text="Optional. Stored encrypted; never shown again.")

    class Meta:
        model = Repository
        fields = ["location", "name", "ssh_key", "allowed_groups"]

    def _post_clean(self):
        # The service validates the location and name and builds the row; the model form's own
        # construction and validation of the instance would only repeat it.
        if not self.errors:
            self.instance = self.register() or self.instance

    def save(self, commit=True):
        self.save_m2m = lambda: None  # the service set the groups
        return self.instance


class RepositoryChangeForm(forms.ModelForm):
    """Credentials can be replaced or cleared, never read."""

    new_token = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                                help_text="Replaces the stored token. Empty: keep it.")
    new_ssh_key = forms.CharField(label="New SSH private key", required=False, strip=False, widget=WriteOnlyTextarea,
                                  help_text="Replaces the stored key. Empty: keep it.")
    clear_credentials = forms.BooleanField(required=False, help_text="Forget the stored token and key.")

    class Meta:
        model = Repository
        fields = ["name", "allowed_groups", "credential_username"]

    def save(self, commit=True):
        repository = super().save(commit=False)
        if self.cleaned_data["clear_credentials"]:
            repository.credential_username = repository.credential_token = repository.credential_ssh_key = ""
        if self.cleaned_data["new_token"]:
            repository.credential_token = secret_encrypt(self.cleaned_data["new_token"])
        if self.cleaned_data["new_ssh_key"].strip():
            repository.credential_ssh_key = secret_encrypt(self.cleaned_data["new_ssh_key"].strip())
        if commit:
            repository.save()
            self.save_m2m()
        return repository


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "default_branch", "has_credentials", "created_at", "created_by"]
    list_select_related = ["created_by"]
    search_fields = ["name", "url"]
    list_filter = ["allowed_groups"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["url", "default_branch", "mined_head", "has_credentials", "max_files", "max_lines",
                       "max_patch_chars", "test_file_globs", "test_dir_names", "created_at", "created_by"]
    actions = ["mine_selected"]

    @admin.display(boolean=True, description="Credentials stored")
    def has_credentials(self, repository):
        return repository.has_credentials

    @method_decorator(sensitive_post_parameters("location", "ssh_key", "new_token", "new_ssh_key"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["form"] = RepositoryChangeForm if obj else RepositoryAddForm
        kwargs["fields"] = None
        form = super().get_form(request, obj, change, **kwargs)
        if obj is None:  # the add form registers as the user who sends it
            form = type(form.__name__, (form,), {"user": request.user})
        return form

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ["location", "name", "ssh_key", "allowed_groups"]})]
        return [
            (None, {"fields": ["name", "url", "default_branch", "mined_head", "allowed_groups", "created_at",
                               "created_by"]}),
            ("Credentials (write-only)", {"fields": ["has_credentials", "credential_username", "new_token",
                                                     "new_ssh_key", "clear_credentials"]}),
            ("Filters (change them on the repository's page, which re-applies them)",
             {"fields": ["max_files", "max_lines", "max_patch_chars", "test_file_globs", "test_dir_names"]}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj else []

    def save_model(self, request, obj, form, change):
        if change:  # an added repository was saved by services.repository_register
            super().save_model(request, obj, form, change)

    def response_add(self, request, obj, post_url_continue=None):
        job, _ = services.mining_job_start(repository=obj, user=request.user)
        self.message_user(request, f"Mining job {job.pk} queued.", messages.INFO)
        return super().response_add(request, obj, post_url_continue)

    def delete_model(self, request, obj):
        services.repository_delete(repository=obj)

    def delete_queryset(self, request, queryset):
        for repository in queryset:
            services.repository_delete(repository=repository)

    @admin.action(description="Mine the selected repositories now")
    def mine_selected(self, request, queryset):
        for repository in queryset:
            services.mining_job_start(repository=repository, user=request.user)
        self.message_user(request, f"Mining queued for {queryset.count()} repositories.", messages.INFO)


@admin.register(MiningJob)
class MiningJobAdmin(admin.ModelAdmin):
    list_display = ["id", "repository", "state", "progress", "new_commits", "error_code", "requested_by",
                    "created_at", "finished_at"]
    list_filter = ["job__state", "job__error_code", "repository"]
    list_select_related = ["repository", "job", "job__requested_by"]
    search_fields = ["repository__name", "job__error_message"]
    date_hierarchy = "created_at"
    actions = ["cancel_selected"]

    @admin.display(description="Progress")
    def progress(self, job):
        return f"{job.progress_done} of {job.progress_total if job.progress_total is not None else '?'} commits"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in MiningJob._meta.fields]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel_selected(self, request, queryset):
        for job in queryset.filter(job__state__in=MiningJob.ACTIVE_STATES).select_related("job"):
            services.mining_job_cancel(job=job)


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ["short_sha", "repository", "subject", "author_name", "committed_at", "drop_reason"]
    list_filter = ["drop_reason", "tests_changed", "repository"]
    list_select_related = ["repository"]
    search_fields = ["sha", "message", "author_name"]
    date_hierarchy = "committed_at"
    show_full_result_count = False

    @admin.display(description="Commit", ordering="sha")
    def short_sha(self, commit):
        return commit.sha[:10]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Commit._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
