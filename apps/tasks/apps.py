from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "apps.tasks"
    label = "tasks"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        # Models can be imported only once Django has loaded every app.
        from .models import CurationSettings, RejectReason
        from .review import REJECT_REASONS_CACHE_KEY

        def forget(key):
            def handler(**kwargs):
                from django.core.cache import cache

                cache.delete(key)
            return handler

        for signal in (post_save, post_delete):
            signal.connect(forget(CurationSettings.CACHE_KEY), sender=CurationSettings, weak=False)
            signal.connect(forget(REJECT_REASONS_CACHE_KEY), sender=RejectReason, weak=False)
