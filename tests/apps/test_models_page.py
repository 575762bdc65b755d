"""The models page: each role's model without its key, and a health check for curators."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def configured(settings):
    settings.COMMITGYM_MODELS = {
        **settings.COMMITGYM_MODELS,
        "agent": {"backend": "openai", "model": "coder-32b", "base_url": "http://user:sk-in-url@127.0.0.1:9/v1",
                  "api_key": "sk-very-secret", "timeout": 5},
    }


def test_each_role_s_model_is_listed_and_no_key_is_shown(annotator_client, configured):
    page = annotator_client.get(reverse("llm:list")).content.decode()
    for role in ("issue_writer", "test_writer", "judge", "agent"):
        assert f'id="role-{role}"' in page
    assert "SmolLM2-135M-Instruct" in page and "coder-32b" in page and "<code>http://127.0.0.1:9/v1</code>" in page
    assert "sk-very-secret" not in page and "sk-in-url" not in page
    assert "Check</button>" not in page  # annotators read only


def test_a_curator_checks_a_role_and_sees_whether_it_answers(curator_client, annotator_client, configured):
    url = reverse("llm:check", args=["agent"])
    assert annotator_client.post(url).status_code == 403
    row = curator_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert row.startswith('\n<tr id="role-agent">') or row.lstrip().startswith('<tr id="role-agent">')
    assert "does not answer" in row and "unreachable" in row and "sk-very-secret" not in row
    healthy = curator_client.post(reverse("llm:check", args=["judge"])).content.decode()  # no JavaScript
    assert "<h1>Models</h1>" in healthy and "gives log-probabilities" in healthy
    assert curator_client.post(reverse("llm:check", args=["nobody"])).status_code == 404
