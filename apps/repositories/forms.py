import re

from django import forms
from django.conf import settings
from django.contrib.auth.models import Group

from apps.accounts.roles import ADMIN, user_roles
from worker.engine.git.location import scheme_refusal
from worker.engine.git.repo import url_split_credentials

from . import services
from .models import Repository


class LocationInput(forms.TextInput):
    """Shows what was typed, minus any credentials: a token never goes back into a page."""

    def format_value(self, value):
        value = super().format_value(value)
        if not value:
            return value
        try:
            return url_split_credentials(value)[0]
        except ValueError:  # not a URL at all: still never show what could be user-info
            return re.sub(r"://[^/@]*@", "://", value)


class WriteOnlyTextarea(forms.Textarea):
    """Accepts a secret and never renders it back."""

    def format_value(self, value):
        return None


def _comma_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def local_folders_allowed(user) -> str:
    """What the form says of local folders, before anyone tries one."""
    if user is not None and ADMIN in user_roles(user):
        return "As an admin you may register any folder on this server."
    roots = [str(root) for root in settings.COMMITGYM_LOCAL_ROOTS]
    if not roots:
        return ("Local folders: none may be registered here; an administrator allows folders with "
                "COMMITGYM_LOCAL_ROOTS.")
    return (f"Local folders: only under {', '.join(roots)} (COMMITGYM_LOCAL_ROOTS, set by an administrator).")


class RepositoryRegisterChecks:
    """The checks registering needs that `services.repository_register` does not do itself,
    shared by the web form and the admin's add form; `register()` calls the service and turns
    its refusal into an error on the field it is about."""

    user = None  # who registers; None is the command line

    def clean_allowed_groups(self):
        groups = self.cleaned_data["allowed_groups"]
        if groups and self.user is not None and ADMIN not in user_roles(self.user) \
                and not set(groups) & set(self.user.groups.all()):
            raise forms.ValidationError("Include one of your own groups, or you would not see the repository.")
        return groups

    def clean_location(self):
        location = self.cleaned_data["location"].strip()
        if not location:
            raise forms.ValidationError("Enter a URL or a local path.")
        if scheme_refusal(location):  # before anything reads the location as a URL
            raise forms.ValidationError(scheme_refusal(location))
        if services.repository_find(location=location) is not None:
            raise forms.ValidationError("This repository is already registered.")
        return location

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if name and Repository.objects.filter(name=name).exists():
            raise forms.ValidationError("A repository with this name already exists.")
        return name

    def register(self):
        """Register the valid form's repository; None, with the refusal as a field error, if the service refuses."""
        data = self.cleaned_data
        try:
            return services.repository_register(
                location=data["location"], name=data.get("name", ""), ssh_key=data.get("ssh_key", ""),
                user=self.user, allowed_groups=data.get("allowed_groups") or ())
        except services.RepositoryRefused as refused:
            self.add_error(refused.field, str(refused))
            return None


class RepositoryRegisterForm(RepositoryRegisterChecks, forms.Form):
    location = forms.CharField(
        max_length=1000,
        widget=LocationInput(attrs={"placeholder": "https://github.com/owner/name.git or /srv/git/name"}),
        help_text="A URL or a local path. A token in the URL (https://user:TOKEN@host/…) is stored as a secret.",
    )
    name = forms.CharField(
        max_length=200, required=False, help_text="owner/name, used in task ids. Empty: taken from the location.")
    ssh_key = forms.CharField(
        label="SSH private key", required=False, strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Optional. Stored encrypted; never shown again.",
    )
    allowed_groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.order_by("name"), required=False,
        help_text="Empty: everyone who can log in sees it. Otherwise only these groups (and admins).",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["location"].help_text += " " + local_folders_allowed(user)


class RepositoryFiltersForm(forms.Form):
    max_files = forms.IntegerField(min_value=0, label="Max non-test files")
    max_lines = forms.IntegerField(min_value=0, label="Max edited lines")
    max_patch_chars = forms.IntegerField(min_value=0, label="Max patch characters")
    test_file_globs = forms.CharField(
        required=False, label="Test file globs", help_text="Comma-separated file-name globs, e.g. test_*.py, *_test.py")
    test_dir_names = forms.CharField(
        required=False, label="Test folder names", help_text="Comma-separated folder names, e.g. tests, test")

    @classmethod
    def for_repository(cls, repository: Repository):
        return cls(initial={
            "max_files": repository.max_files,
            "max_lines": repository.max_lines,
            "max_patch_chars": repository.max_patch_chars,
            "test_file_globs": ", ".join(repository.test_file_globs),
            "test_dir_names": ", ".join(repository.test_dir_names),
        })

    def clean_test_file_globs(self):
        return _comma_list(self.cleaned_data["test_file_globs"])

    def clean_test_dir_names(self):
        return _comma_list(self.cleaned_data["test_dir_names"])


class CommitFilterForm(forms.Form):
    status = forms.ChoiceField(required=False)
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "message, sha or author"}))

    def __init__(self, data, *, status_choices):
        super().__init__(data)
        self.fields["status"].choices = status_choices

    def filters(self) -> dict:
        """The valid filters, as keyword arguments for selectors.commits_filtered; invalid ones are ignored."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {
            "status": data.get("status") or "",
            "since": data.get("since"),
            "until": data.get("until"),
            "text": (data.get("q") or "").strip(),
        }

