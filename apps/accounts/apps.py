from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_migrate


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"

    def ready(self):
        from django.contrib.auth.models import User

        # Models can be imported only once Django has loaded every app.
        from .roles import admin_group_permissions_grant, user_staff_sync

        # After every app, since each app's permissions appear with its own post_migrate.
        post_migrate.connect(admin_group_permissions_grant)
        m2m_changed.connect(user_staff_sync, sender=User.groups.through)
