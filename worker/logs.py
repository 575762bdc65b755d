"""Log records leave with credentials taken out, whoever logged them: a URL's user-info or query
token, however it got into the message or the traceback."""

import logging

from worker.engine.git.repo import GitCredentials


class CredentialsRedacted(logging.Filter):
    """Installed on every handler (Django's, and the Celery worker's after it sets up logging)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact = GitCredentials().redact
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def handlers_redact(logger: logging.Logger) -> None:
    for handler in logger.handlers:
        for kind in (CredentialsRedacted, FilesystemBrokerHostname):
            if not any(isinstance(existing, kind) for existing in handler.filters):
                handler.addFilter(kind())


class FilesystemBrokerHostname(logging.Filter):
    """Kombu warns "No hostname was supplied" for every connection to the filesystem broker (the
    embedded default), which has no host: a warning a user can do nothing about."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "kombu.connection" and record.getMessage().startswith("No hostname was supplied"))
