"""The actions a person takes on a session, one function each, the same for a local session and a
dispatched one (`place.locate` decides which it is, once): `tilth answer/note/stop/resume/start/cleanse/
reset/plan edit` and the dashboard call these and only show the `Acted` they return. `from tilth.actions
import stop_session` imports only the module that defines it (the CLI's cold start)."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from tilth.actions.acted import Acted
    from tilth.actions.place import answer_question, leave_note, resume_session, stop_session
    from tilth.actions.planning import replace_plan
    from tilth.actions.retiring import cleanse_session, reset_session
    from tilth.actions.starting import start_session

WHERE = {"Acted": "acted", "answer_question": "place", "leave_note": "place", "replace_plan": "planning",
         "resume_session": "place", "cleanse_session": "retiring", "reset_session": "retiring",
         "start_session": "starting", "stop_session": "place"}
"""Each name this package offers, and the module that defines it."""

__all__ = ["Acted", "answer_question", "cleanse_session", "leave_note", "replace_plan", "reset_session",
           "resume_session", "start_session", "stop_session"]


def __getattr__(name: str) -> object:
    if name not in WHERE:
        raise AttributeError(f"module 'tilth.actions' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"tilth.actions.{WHERE[name]}"), name)
