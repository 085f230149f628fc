"""`tilth calibrate`: run the configured evaluator over the fixtures shipped with tilth and print its
false-accept and false-reject rates, cost and time per verdict. The handler only parses, calls
`cli/calibrate.py` and prints."""

from __future__ import annotations

import argparse


def cmd_calibrate(args: argparse.Namespace) -> int:
    import json

    from tilth.cli import calibrate
    from tilth.cli.backend_choice import backend_choice
    from tilth.core.settings_load import load_settings
    from tilth.store.home import tilth_home

    settings = load_settings(tilth_home())
    result = calibrate.calibrate(backend_choice(args, settings), settings, args.only or None)
    print(json.dumps(calibrate.as_json(result), indent=2) if args.json else calibrate.render(result), end="\n"
          if args.json else "")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    said = "measure the evaluator: false accepts and rejects over shipped fixtures"
    cal = sub.add_parser("calibrate", help=said,
                         description=f"{said}. The configured evaluator judges the fixtures shipped with tilth "
                                     "(small tasks, each with a correct change and a subtly wrong one); printed: "
                                     "its false-accept and false-reject rates, cost and time per verdict.")
    cal.add_argument("--backend", help="agent backend; `scripted` replays a scenario (tests/demo, no model)")
    cal.add_argument("--scenario", help="scenario file for the scripted backend (fixture id -> [verdict on the "
                                        "correct change, verdict on the wrong one])")
    cal.add_argument("--only", action="append", metavar="ID", help="judge only this fixture (repeatable)")
    cal.add_argument("--json", action="store_true", help="print the result as JSON")
    cal.set_defaults(handler=cmd_calibrate)
