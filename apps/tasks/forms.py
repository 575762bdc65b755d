from django import forms
from django.contrib.auth import get_user_model
from django.core.cache import cache

from .models import Review, Task
from .review import active_reject_reasons

YES_NO = [("", "Any"), ("yes", "Yes"), ("no", "No")]
SORT_LABELS = {"-updated": "Recently changed", "updated": "Longest unchanged", "-created": "Newest",
               "-f2p": "Most F2P tests", "f2p": "Fewest F2P tests", "-leak": "Highest leak score",
               "-underspecified": "Most underspecified", "-false_negative": "Tests most likely wrong",
               "id": "Task id"}
VERDICTS = [("", "Any"), ("valid", "valid"), ("invalid", "invalid"), ("environment_failed", "environment failed"),
            ("none", "not validated")]


class TaskFilterForm(forms.Form):
    """The task list's filters and sort; every field is optional and a bad value is ignored."""

    q = forms.CharField(required=False, label="Search", max_length=200,
                        widget=forms.TextInput(attrs={"placeholder": "task id or commit message", "type": "search"}))
    repository = forms.ChoiceField(required=False)
    state = forms.ChoiceField(required=False)
    verdict = forms.ChoiceField(required=False, choices=VERDICTS, label="Validity")
    reason = forms.ChoiceField(required=False)
    flaky = forms.ChoiceField(required=False, choices=YES_NO, label="Flaky tests")
    leak = forms.ChoiceField(required=False, choices=[("", "Any"), ("flagged", "Flagged"), ("clear", "Not flagged")],
                             label="Leak flag")
    f2p_min = forms.IntegerField(required=False, min_value=0, label="F2P at least")
    f2p_max = forms.IntegerField(required=False, min_value=0, label="F2P at most")
    generated = forms.ChoiceField(required=False, choices=YES_NO, label="Generated tests")
    reviewer = forms.ChoiceField(required=False)
    underspecified_min = forms.TypedChoiceField(required=False, coerce=int, empty_value=None,
                                                choices=[("", "Any")] + [(str(n), f"≥ {n}") for n in range(4)],
                                                label="Underspecified")
    false_negative_min = forms.TypedChoiceField(required=False, coerce=int, empty_value=None,
                                                choices=[("", "Any")] + [(str(n), f"≥ {n}") for n in range(4)],
                                                label="Tests reject valid")
    disagree = forms.ChoiceField(required=False, choices=YES_NO, label="Reviewers disagree")
    mutation_max = forms.FloatField(required=False, min_value=0, max_value=1, label="Mutation score at most",
                                    help_text="The share of the gold patch's mutants the hidden tests catch (0-1).")
    sort = forms.ChoiceField(required=False, choices=list(SORT_LABELS.items()))

    def __init__(self, data, *, repositories, state_counts: dict[str, int], reasons: list[str], reviewers):
        super().__init__(data)
        self.fields["repository"].choices = [("", "All")] + [(str(r.pk), r.name) for r in repositories]
        total = sum(state_counts.values())
        self.fields["state"].choices = [("", f"All ({total:,})")] + [
            (value, f"{label} ({state_counts.get(value, 0):,})") for value, label in Task.State.choices]
        self.fields["reason"].choices = [("", "Any")] + [(code, code) for code in reasons]
        self.fields["reviewer"].choices = [("", "Anyone")] + [(str(pk), name) for pk, name in reviewers]

    def filters(self) -> dict:
        """The valid filters, as keyword arguments for selectors.tasks_filtered."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {name: value for name, value in data.items() if value not in (None, "")}


class ReviewScoresForm(forms.Form):
    """The rubric and a decision; the buttons of the review page post it."""

    decision = forms.ChoiceField(choices=Review.Decision.choices)
    # Accepting needs the rubric; rejecting only a reason (the service says which is missing).
    underspecified = forms.TypedChoiceField(choices=Review.SCORES, coerce=int, empty_value=None, required=False,
                                            widget=forms.RadioSelect, label="Is the issue well specified?")
    false_negative = forms.TypedChoiceField(choices=Review.SCORES, coerce=int, empty_value=None, required=False,
                                            widget=forms.RadioSelect, label="Could the tests reject a valid solution?")
    difficulty = forms.ChoiceField(choices=Review.DIFFICULTY_CHOICES, widget=forms.RadioSelect, required=False,
                                   label="How long would a developer take to fix it?")
    other_problems = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                     label="Other problems")
    reject_reason = forms.ChoiceField(required=False, label="Reason for rejecting")
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Note")
    settle = forms.BooleanField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["reject_reason"].choices = [("", "—")] + [(r.code, r.sentence) for r in active_reject_reasons()]


def reviewers_choices() -> list[tuple[int, str]]:
    """(id, user name) of the people who reviewed anything, for the reviewer filter; read at most once
    a minute."""
    users = get_user_model().objects.filter(reviews__isnull=False).distinct().order_by("username")
    return cache.get_or_set("tasks:reviewers", lambda: list(users.values_list("pk", "username")), 60)
