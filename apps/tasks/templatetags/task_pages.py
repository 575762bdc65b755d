"""Task sections shown on pages of other apps."""

from django import template
from django.utils.dateformat import format as date_format
from django.utils.html import escape, format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from django.utils.timezone import localtime
from markdown_it import MarkdownIt

from apps.tasks import selectors
from apps.tasks.models import Task, Validation
from worker.engine.reasons import reason_sentence

register = template.Library()


@register.inclusion_tag("tasks/validation_funnel.html")
def validation_funnel(repository):
    """The repository's tasks through validation, as bars like the mining funnel's (one query)."""
    steps = selectors.repository_validation_funnel(repository=repository)
    total = steps[0].remaining or 1
    return {
        "repository": repository,
        "steps": [(step, 100 * step.remaining / total, 100 * step.dropped / total) for step in steps],
        "environment_failures": selectors.repository_environment_failures(repository=repository),
        "reuse": selectors.environment_reuse(validations=Validation.objects.filter(task__repository=repository)),
    }


# --- the task list: its rows and its selects are written here, not in the template -----------------
# The list is the busiest page; Django's template engine spent most of its time on these.


def _badge(kind: str, text, title: str = "") -> str:
    title = f' title="{escape(title)}"' if title else ""
    return f'<span class="badge badge-{escape(kind)}"{title}>{escape(str(text))}</span>'


@register.simple_tag
def task_list_row(row, show_repository: bool, leak_threshold: float):
    """One row of the task list (see task_list.html for its columns); `row` is a selectors.TaskRow.
    Every value is escaped here: one f-string a row is several times faster than format_html."""
    state = _badge(row.state, Task.State(row.state).label, reason_sentence(row.reason) if row.reason else "")
    if row.reason:
        state += f' <span class="muted small">{escape(row.reason)}</span>'
    verdict = escape(row.verdict or "—") + (" " + _badge("generated", "generated") if row.has_generated_tests else "")
    leak = "—"
    if row.leak_score is not None:
        leak = f"{row.leak_score:.2f}" + (" " + _badge("leak", "leak") if row.leak_score > leak_threshold else "")
    reviews = "—"
    if row.review_count:
        scores = "/".join("–" if score is None else str(score) for score in (row.underspecified, row.false_negative))
        reviews = f"{row.review_count} · {scores}"
        reviews += " " + _badge("disagree", "disagree") if row.disagree else ""
    if row.held_by:
        reviews += f' <span class="muted small">held by {escape(row.held_by)}</span>'
    repository = (f'<td title="{escape(row.repository_name)}">{escape(Truncator(row.repository_name).chars(60))}</td>'
                  if show_repository else "")
    flaky = _badge("flaky", row.flaky_count) if row.flaky_count else "0"
    return mark_safe(
        f'<tr><td><a href="{escape(row.review_url)}"><code>{escape(row.instance_id)}</code></a></td>{repository}'
        f'<td class="subject">{escape(Truncator(row.subject).chars(70))}</td><td>{state}</td><td>{verdict}</td>'
        f'<td class="num">{row.fail_to_pass_count if row.verdict else "—"}</td><td class="num">{flaky}</td>'
        f'<td class="num">{leak}</td>'
        f'<td>{reviews}</td><td class="nowrap">{date_format(localtime(row.updated_at), "Y-m-d H:i")}</td></tr>')


@register.simple_tag
def select_options(field):
    """The <option>s of a choice field, the submitted one selected; a long label cut, whole in its
    tooltip (a repository's name can be 200 characters)."""
    current = "" if field.value() is None else str(field.value())
    return format_html_join("", '<option value="{}" title="{}"{}>{}</option>', (
        (value, label, mark_safe(" selected") if str(value) == current else "", Truncator(str(label)).chars(60))
        for value, label in field.field.choices))


# Markdown as an issue reader sees it on a forge: CommonMark, raw HTML left as text, links only to
# safe schemes (markdown-it's own check), code fences as code.
# Images are not fetched: a model's or an import's text must not make curators' browsers call out.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).disable("image")


@register.filter
def issue_markdown(text: str) -> str:
    return mark_safe(f'<div class="issue-markdown">{_MARKDOWN.render(text or "")}</div>')
