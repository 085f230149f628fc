"""`make_backend`: the scripted backend, or each role's agent as the settings choose."""

from __future__ import annotations

from tilth.agents.accounting import Meter
from tilth.agents.protocol import Backend, Evaluator, Learner, Worker
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.store.session import BackendChoice


def make_backend(choice: BackendChoice, settings: Settings, meter: Meter) -> Backend:
    """The scripted backend, or each role's agent as the settings choose (`openai`: tilth's own
    loop; `claude`, `codex`, `aider`, `command`: a CLI agent); several evaluators make a panel."""
    if choice.name == "scripted":
        from tilth.agents.backends.scripted import scripted_backend

        return scripted_backend(choice)
    if choice.name not in ("openai", "agents"):
        raise BadInput(f"unknown backend {choice.name!r}; use `openai` (set TILTH_BASE_URL), a CLI agent "
                       "(TILTH_WORKER_BACKEND=claude|codex|aider|copilot|gemini|qwen|opencode|command) or `scripted` (tests/demo)")
    from tilth.agents.backends.command import LABELS, CliEvaluator, CliLearner, CliWorker
    from tilth.agents.backends.fallback import Fallback, FallbackEvaluator, FallbackWorker
    from tilth.agents.backends.openai_agents import OpenAIEvaluator, OpenAILearner, OpenAIWorker
    from tilth.agents.backends.panel import Panel

    settings.require_model()
    for role, spare in (("worker", settings.worker_fallback), ("evaluator", settings.evaluator_fallback)):
        url, _, model = settings.endpoint(role)
        if spare == "openai" and not (url and model):
            raise BadInput(f"{role}_fallback = openai needs the model endpoint: set TILTH_BASE_URL and "
                           f"TILTH_{role.upper()}_MODEL")
    online = sorted({settings.worker_backend, *settings.evaluator_backends(), settings.worker_fallback or "openai",
                     settings.evaluator_fallback or "openai"} &
                    {"claude", "codex", "aider", "copilot", "gemini", "qwen", "opencode"})
    if online and settings.agent_network == "off":
        raise BadInput(f"agent_network = off would cut {' and '.join(online)} off its own model endpoint (it runs "
                       "inside the sandbox): set TILTH_AGENT_NETWORK=on")

    def evaluator(name: str) -> Evaluator:
        return OpenAIEvaluator(settings, meter) if name == "openai" else CliEvaluator(name, settings, meter)

    def describe(name: str, role: str) -> str:
        if name != "openai":
            return LABELS[name] + (f" `{settings.worker_command}`" if name == "command" and role == "worker" else
                                   f" `{settings.evaluator_command}`" if name == "command" else "")
        url, _, model = settings.endpoint(role)
        return f"openai-compatible at {url} ({model})"

    def worker_of(name: str) -> Worker:
        return OpenAIWorker(settings, meter) if name == "openai" else CliWorker(name, settings, meter)

    chosen = settings.worker_backend
    worker = worker_of(chosen)
    names = settings.evaluator_backends()
    members = [(name, evaluator(name)) for name in names]
    judge = members[0][1] if len(members) == 1 else Panel(members, settings.evaluator_policy)
    fallbacks = []
    if (spare := settings.worker_fallback) is not None and spare != chosen:
        worker = FallbackWorker(worker, worker_of(spare), Fallback("worker", chosen, spare, settings))
        fallbacks.append(f"worker fallback: {describe(spare, 'worker')}")
    if (spare := settings.evaluator_fallback) is not None and len(names) == 1 and spare != names[0]:
        judge = FallbackEvaluator(judge, evaluator(spare), Fallback("evaluator", names[0], spare, settings))
        fallbacks.append(f"evaluator fallback: {describe(spare, 'evaluator')}")
    if chosen == "openai" or (chosen == "command" and settings.base_url):
        learner: Learner = OpenAILearner(settings, meter)
    else:
        learner = CliLearner(chosen, settings, meter)
    judges = " + ".join(describe(name, "evaluator") for name in names)
    policy = f" (panel, {settings.evaluator_policy} must accept)" if len(names) > 1 else ""
    label = f"worker: {describe(chosen, 'worker')}; evaluator: {judges}{policy}"
    if chosen == "openai" and names == ["openai"]:
        (url, _, worker_model), evaluator_model = settings.endpoint("worker"), settings.endpoint("evaluator")[2]
        label = f"openai-compatible at {url} (worker {worker_model}, evaluator {evaluator_model})"
    label += "".join(f"; {said}" for said in fallbacks)
    return Backend(choice.name, label, worker, judge, learner)
