"""Where a lower app shows or triggers something of a higher one. The apps stand in layers (the
README's layout, checked by `lint-imports`): each imports only the apps below it. When a lower app
needs something of a higher one (a job's subject, the tasks of commits kept after mining, a panel on
a page), the lower app declares an extension point and calls what is registered there; the higher
app registers its function in its AppConfig's `ready()`, as job kinds are registered."""

from typing import Callable, Iterator


class ExtensionPoint:
    """Functions registered by higher apps, called in the order they were registered."""

    def __init__(self, name: str):
        self.name = name
        self._functions: dict[str, Callable] = {}

    def register(self, function: Callable) -> Callable:
        """Register `function`; registering it again (a reload) changes nothing."""
        self._functions[f"{function.__module__}.{function.__qualname__}"] = function
        return function

    def __iter__(self) -> Iterator[Callable]:
        return iter(list(self._functions.values()))

    def call(self, *args, **kwargs) -> list:
        """What each registered function returns, in order."""
        return [function(*args, **kwargs) for function in self]

    def context(self, *args, **kwargs) -> dict:
        """The registered functions' dicts merged (a page's panels from higher apps)."""
        merged: dict = {}
        for part in self.call(*args, **kwargs):
            merged.update(part)
        return merged

    def __repr__(self) -> str:
        return f"<ExtensionPoint {self.name}: {', '.join(self._functions) or 'nothing registered'}>"
