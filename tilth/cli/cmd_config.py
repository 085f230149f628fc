"""`tilth config [id]`: every setting with its value, where it came from and its scope; with a
session id, the settings that session recorded at start and which differ from the current ones."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (a cold start)
if TYPE_CHECKING:
    from tilth.core.config import Settings


def cmd_config(args: argparse.Namespace) -> int:
    from tilth.core.settings_load import load_settings_with_sources
    from tilth.views.settings_shown import describe
    from tilth.core.travel import scope_of
    from tilth.store.home import tilth_home

    settings, sources = load_settings_with_sources(tilth_home())
    if args.id:
        print("\n".join(recorded_lines(args.id, settings)))
        return 0
    from tilth.daemon.control import environment_differences, holder

    print(f"TILTH_HOME = {tilth_home()}")
    print("\n".join(describe(settings, sources, scope_of)))
    from tilth.agents.pricing import how_to_price, rate_lines, unpriced

    print("\n".join(rate_lines(settings)))
    for model, named in unpriced(settings):
        refused = "; tilth start refuses it while max_spend_usd is set" if settings.max_spend_usd is not None else ""
        print(f"price: none for {'model ' + repr(model) if model else 'the model ' + named + ' would name'} "
              f"({named}), so its spend is unknown{refused}: {how_to_price(model, named)}")
    info = holder(tilth_home())
    print("\n".join(environment_differences(info)) if info else "supervisor: not running (it takes the environment "
          "of the command that starts it)")
    return 0


def recorded_lines(session_id: str, settings: Settings) -> list[str]:
    """A session's recorded settings, each `[scope]`, marked where the current configuration differs."""
    from tilth.cli.pick import pick_session
    from tilth.core.travel import SCOPES, scope_of

    paths, record = pick_session(session_id)
    current = settings.model_dump(mode="json")
    lines = [f"session {paths.id}: settings recorded at start (or by the last `tilth resume`)"]
    differ = []
    for field, value in sorted(record.settings.items()):
        try:
            scope = scope_of(field)
        except KeyError:
            scope = "no longer a setting"
        now = current.get(field)
        mark = ""
        if field in current and now != value:
            differ.append(field)
            mark = f"  (now {now!r})"
        lines.append(f"{field} = {value!r}  [{scope}]{mark}")
    lines.append(f"keys used, by name only [secret]: {', '.join(record.keys) or 'none'}")
    if differ:
        lines.append(f"{len(differ)} differ from the current configuration ({', '.join(differ)}): `tilth resume "
                     f"{paths.id}` keeps the recorded values except those this shell sets; `tilth resume {paths.id} "
                     f"--reload-settings` takes every current {'/'.join(s for s in SCOPES if s in ('session', 'machine'))}"
                     " setting")
    else:
        lines.append("all match the current configuration")
    return lines


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = sub.add_parser("config", help="the resolved configuration: each value, where it came from, its scope")
    config.add_argument("id", nargs="?", help="show the settings this session recorded and which differ from now")
    config.set_defaults(handler=cmd_config)
