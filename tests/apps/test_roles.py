import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from apps.accounts.roles import user_can_mine, user_roles


@pytest.mark.django_db
def test_the_three_roles_exist():
    assert set(Group.objects.values_list("name", flat=True)) >= {"curator", "annotator", "admin"}


@pytest.mark.django_db
def test_admin_role_opens_the_django_admin_and_leaving_it_closes_it(admin_user):
    admin_user.refresh_from_db()
    assert admin_user.is_staff
    client = Client()
    client.force_login(admin_user)
    assert client.get(reverse("admin:repositories_repository_changelist")).status_code == 200
    admin_user.groups.remove(Group.objects.get(name="admin"))
    admin_user.refresh_from_db()
    assert not admin_user.is_staff


@pytest.mark.django_db
def test_roles_decide_who_mines(curator, annotator, admin_user):
    assert user_roles(curator) == {"curator"} and user_can_mine(curator)
    assert user_roles(annotator) == {"annotator"} and not user_can_mine(annotator)
    assert user_can_mine(admin_user)
    nobody = User.objects.create_user("nobody", password="pw")
    assert user_roles(nobody) == set() and not user_can_mine(nobody)


@pytest.mark.django_db
def test_every_page_needs_a_login(client):
    for url in ("/", reverse("repositories:list"), "/admin/"):
        response = client.get(url)
        assert response.status_code == 302 and "login" in response["Location"], url


def test_an_annotator_sent_away_from_the_review_queue_is_told_why_and_where_to_go(annotator_client):
    response = annotator_client.get(reverse("tasks:queue"))
    page = response.content.decode()
    assert response.status_code == 403
    assert "The review queue hands curators and admins the next task to accept or reject." in page
    assert "repositor" not in page.split('id="refusal"')[1].split("</p>")[0]  # not about registering
    assert "You are logged in as anton (annotator)." in page
    assert f'href="{reverse("tasks:all")}"' in page
