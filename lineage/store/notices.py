"""What questions and writes that succeeded have to say, kept for the command line to
print as warnings (the core never prints): a commit left in the catalog's log, a damaged
lookup arrays file a question did not use."""

from __future__ import annotations

_NOTICES: list[str] = []
_MAX_NOTICES = 100  # a long-lived process (a library user's) may never take them


def add_notice(text: str) -> None:
    """Keep `text` to print, once however often it is said."""
    if len(_NOTICES) < _MAX_NOTICES and text not in _NOTICES:
        _NOTICES.append(text)


def take_notices() -> list[str]:
    """The notices kept since the last call, once."""
    taken = list(_NOTICES)
    _NOTICES.clear()
    return taken
