"""Before `tilth start` creates anything: can each model endpoint be used at all?

One `GET /models` per distinct endpoint (the worker's, and the evaluator's when it differs),
short timeout, no retries. It answers the three questions a new user gets wrong: is the server
up at that URL, does it take the key, does it know the model. A chat call would answer too, but
it costs tokens and is not free of side effects on every server; the model list is.

Only a clear answer refuses the start. A server without the model list (404/405/501 on
`/models`) cannot tell us, nor can one whose list lacks the model while its `/models/<id>`
route is missing (single-model servers answer to any name): those pass, the latter with a line
saying the list lacks the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from tilth.agents.backends.openai_sdk import import_openai
from tilth.core.config import Settings
from tilth.core.errors import BadInput

if TYPE_CHECKING:
    from openai import OpenAI

TIMEOUT_S = 10.0
SKIP = "set TILTH_PREFLIGHT=false to skip this check"


@dataclass(frozen=True)
class Endpoint:
    roles: str
    """`worker`, `evaluator`, or `worker and evaluator` when they share the endpoint."""
    url: str
    key: str
    model: str


def endpoints(settings: Settings) -> list[Endpoint]:
    """The endpoints of the roles tilth's own loop plays (a CLI agent reaches its own)."""
    worker = Endpoint("worker", *settings.endpoint("worker"))
    evaluator = Endpoint("evaluator", *settings.endpoint("evaluator"))
    if settings.worker_backend != "openai":
        return [evaluator] if "openai" in settings.evaluator_backends() else []
    if "openai" not in settings.evaluator_backends():
        return [worker]
    if (evaluator.url, evaluator.key, evaluator.model) == (worker.url, worker.key, worker.model):
        return [Endpoint("worker and evaluator", worker.url, worker.key, worker.model)]
    return [worker, evaluator]


def preflight(settings: Settings, progress: Callable[[str], None] | None = None) -> list[str]:
    """Raise BadInput (one line) when an endpoint clearly cannot serve this session; else the lines
    to say of what it could not settle (a listed model set that lacks the configured model).
    `progress` is told before each endpoint is asked (a sign of life: an unreachable one takes up to TIMEOUT_S)."""
    eps = endpoints(settings)
    if eps and progress is not None:  # said before the SDK's import, which takes seconds of its own
        urls = ", ".join(dict.fromkeys(e.url for e in eps))
        progress(f"preflight: asking {urls} for the model list (up to {TIMEOUT_S:g}s; {SKIP})")
    openai = import_openai()

    listed: dict[tuple[str, str], set[str] | None] = {}
    doubts: list[str] = []
    for ep in eps:
        client = openai.OpenAI(base_url=ep.url, api_key=ep.key, max_retries=0, timeout=TIMEOUT_S)
        if (ep.url, ep.key) not in listed:
            shared = " and ".join(e.roles for e in eps if (e.url, e.key) == (ep.url, ep.key))
            listed[(ep.url, ep.key)] = _models(client, Endpoint(shared, ep.url, ep.key, ep.model))
        models = listed[(ep.url, ep.key)]
        if models is None or ep.model in models:
            continue
        shown = ", ".join(sorted(models)[:5]) + (", ..." if len(models) > 5 else "")
        if _missing(client, ep):
            raise BadInput(f"preflight: the {ep.roles} model {ep.model!r} is not found at {ep.url} "
                           f"(it offers: {shown or 'none'}); check TILTH_{_var(ep)}, or {SKIP}")
        doubts.append(f"preflight: the {ep.roles} model {ep.model!r} is not in the model list at {ep.url} "
                      f"(it offers: {shown or 'none'}) and the server does not say whether it knows it; starting "
                      f"anyway (a single-model server answers to any name): check TILTH_{_var(ep)} if its calls fail")
    return doubts


def _var(ep: Endpoint) -> str:
    return "EVALUATOR_MODEL" if ep.roles == "evaluator" else "WORKER_MODEL"


def _key_var(ep: Endpoint) -> str:
    return "TILTH_EVALUATOR_API_KEY or TILTH_API_KEY" if ep.roles == "evaluator" else "TILTH_API_KEY"


def _models(client: OpenAI, ep: Endpoint) -> set[str] | None:
    """The ids the endpoint lists, or None when it has no model list to ask."""
    openai = import_openai()

    try:
        return {m.id for m in client.models.list()}
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        raise BadInput(f"preflight: the {ep.roles} endpoint is unreachable at {ep.url} "
                       f"({_cause(exc)}); check TILTH_BASE_URL and that the server is running, or {SKIP}") from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise BadInput(f"preflight: the {ep.roles} endpoint {ep.url} rejected the key ({exc.status_code}: "
                       f"{_message(exc).replace(ep.key, '[redacted]')}); check {_key_var(ep)}, or {SKIP}") from None
    except (openai.APIStatusError, openai.APIResponseValidationError, ValueError, TypeError, AttributeError):
        return None


def _missing(client: OpenAI, ep: Endpoint) -> bool:
    """The list lacks the model: only the server's own `model not found` on `/models/<id>` settles it."""
    openai = import_openai()

    try:
        client.models.retrieve(ep.model)
    except openai.NotFoundError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        message = _message(exc).lower()
        # A missing route's 404 never names the model; a server saying the model is unknown does.
        named = ep.model.lower() in message and ("not found" in message or "does not exist" in message)
        return body.get("code") == "model_not_found" or named
    except (openai.OpenAIError, ValueError, TypeError, AttributeError):
        return False
    return False


def _message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    said = body.get("message") if isinstance(body, dict) else None
    text = said if isinstance(said, str) else str(exc)
    return " ".join(text.split())[:200]


def _cause(exc: BaseException) -> str:
    while exc.__cause__ is not None and exc.__cause__ is not exc:
        exc = exc.__cause__
    return " ".join(str(exc).split())[:200] or type(exc).__name__
