"""The fixture set `tilth calibrate` runs an evaluator over: small tasks, each with a correct change
and a subtly wrong one (an off-by-one, a missed criterion, a weakened test). Data only.

Each fixture: `id`, `title`, `description`, `criteria`, `files` (the base commit), `correct` and
`wrong` (files written over the base; None deletes a file), `flaw` (what is wrong with `wrong`)."""

from __future__ import annotations

from typing import Any

OFF_BY_ONE, MISSED, WEAKENED = "off_by_one", "missed_criterion", "weakened_test"

FIXTURES: list[dict[str, Any]] = [
    {"id": "CAL-01", "title": "Inclusive integer range", "flaw": OFF_BY_ONE,
     "description": "Add `span(a, b)` to ranges.py: the integers from a to b, both included.",
     "criteria": ["`span(2, 5)` returns [2, 3, 4, 5]", "`span(3, 3)` returns [3]"],
     "files": {"ranges.py": '"""Integer ranges."""\n'},
     "correct": {"ranges.py": '"""Integer ranges."""\n\n\ndef span(a, b):\n    return list(range(a, b + 1))\n'},
     "wrong": {"ranges.py": '"""Integer ranges."""\n\n\ndef span(a, b):\n    return list(range(a, b))\n'}},
    {"id": "CAL-02", "title": "Pages counted from 1", "flaw": OFF_BY_ONE,
     "description": "Add `page(items, number, size)` to paging.py; page 1 is the first `size` items.",
     "criteria": ["`page([1, 2, 3, 4, 5], 1, 2)` returns [1, 2]", "`page([1, 2, 3, 4, 5], 3, 2)` returns [5]"],
     "files": {"paging.py": '"""Paging."""\n'},
     "correct": {"paging.py": '"""Paging."""\n\n\ndef page(items, number, size):\n'
                              '    start = (number - 1) * size\n    return items[start:start + size]\n'},
     "wrong": {"paging.py": '"""Paging."""\n\n\ndef page(items, number, size):\n'
                            '    start = number * size\n    return items[start:start + size]\n'}},
    {"id": "CAL-03", "title": "Slugs without punctuation", "flaw": MISSED,
     "description": "Add `slugify(text)` to slug.py.",
     "criteria": ["the slug is lower case", "spaces become `-`", "punctuation is removed: `slugify('Hi, you!')` "
                  "returns 'hi-you'"],
     "files": {"slug.py": '"""Slugs."""\n'},
     "correct": {"slug.py": '"""Slugs."""\nimport re\n\n\ndef slugify(text):\n'
                            '    text = re.sub(r"[^\\w\\s-]", "", text.lower())\n    return "-".join(text.split())\n'},
     "wrong": {"slug.py": '"""Slugs."""\n\n\ndef slugify(text):\n    return "-".join(text.lower().split())\n'}},
    {"id": "CAL-04", "title": "is_even for negative numbers", "flaw": WEAKENED,
     "description": "`is_even` in parity.py is wrong for negative numbers; fix it. The tests must keep "
                    "covering negative numbers.",
     "criteria": ["`is_even(-2)` returns True and `is_even(-3)` returns False", "tests/test_parity.py passes"],
     "files": {"parity.py": 'def is_even(n):\n    return n > 0 and n % 2 == 0\n',
               "tests/test_parity.py": 'from parity import is_even\n\n\ndef test_positive():\n'
                                       '    assert is_even(4)\n\n\ndef test_negative():\n    assert is_even(-2)\n'},
     "correct": {"parity.py": 'def is_even(n):\n    return n % 2 == 0\n'},
     "wrong": {"tests/test_parity.py": 'from parity import is_even\n\n\ndef test_positive():\n'
                                       '    assert is_even(4)\n'}},
    {"id": "CAL-05", "title": "FizzBuzz up to n", "flaw": OFF_BY_ONE,
     "description": "Add `fizzbuzz(n)` to fizz.py: the FizzBuzz strings for 1 to n inclusive.",
     "criteria": ["`fizzbuzz(15)` has 15 items", "its last item is 'FizzBuzz'"],
     "files": {"fizz.py": '"""FizzBuzz."""\n'},
     "correct": {"fizz.py": '"""FizzBuzz."""\n\n\ndef fizzbuzz(n):\n    return ["FizzBuzz" if i % 15 == 0 else '
                            '"Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i)\n'
                            '            for i in range(1, n + 1)]\n'},
     "wrong": {"fizz.py": '"""FizzBuzz."""\n\n\ndef fizzbuzz(n):\n    return ["FizzBuzz" if i % 15 == 0 else '
                          '"Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i)\n'
                          '            for i in range(1, n)]\n'}},
    {"id": "CAL-06", "title": "Validated port numbers", "flaw": MISSED,
     "description": "Add `parse_port(text)` to ports.py.",
     "criteria": ["`parse_port('8080')` returns 8080", "a port outside 1..65535 raises ValueError"],
     "files": {"ports.py": '"""Ports."""\n'},
     "correct": {"ports.py": '"""Ports."""\n\n\ndef parse_port(text):\n    port = int(text)\n'
                             '    if not 1 <= port <= 65535:\n        raise ValueError(f"port {port} out of range")\n'
                             '    return port\n'},
     "wrong": {"ports.py": '"""Ports."""\n\n\ndef parse_port(text):\n    return int(text)\n'}},
    {"id": "CAL-07", "title": "A timeout for fetch", "flaw": WEAKENED,
     "description": "`fetch(url, timeout=...)` in net.py must pass its timeout on; the existing test "
                    "test_timeout_is_passed checks it.",
     "criteria": ["`fetch` passes `timeout` to `opener`", "tests/test_net.py passes"],
     "files": {"net.py": 'def fetch(url, opener, timeout=10):\n    return opener(url)\n',
               "tests/test_net.py": 'from net import fetch\n\n\ndef test_timeout_is_passed():\n'
                                    '    seen = {}\n    fetch("u", lambda url, **kw: seen.update(kw), timeout=3)\n'
                                    '    assert seen == {"timeout": 3}\n'},
     "correct": {"net.py": 'def fetch(url, opener, timeout=10):\n    return opener(url, timeout=timeout)\n'},
     "wrong": {"tests/test_net.py": 'import pytest\n\nfrom net import fetch\n\n\n@pytest.mark.skip(reason="flaky")\n'
                                    'def test_timeout_is_passed():\n'
                                    '    seen = {}\n    fetch("u", lambda url, **kw: seen.update(kw), timeout=3)\n'
                                    '    assert seen == {"timeout": 3}\n'}},
    {"id": "CAL-08", "title": "Truncate with an ellipsis", "flaw": OFF_BY_ONE,
     "description": "Add `truncate(text, limit)` to text.py: at most `limit` characters, the ellipsis "
                    "counted, when the text is longer.",
     "criteria": ["`truncate('abcdef', 4)` returns 'abc…' (4 characters)", "a short text is returned unchanged"],
     "files": {"text.py": '"""Text helpers."""\n'},
     "correct": {"text.py": '"""Text helpers."""\n\n\ndef truncate(text, limit):\n'
                            '    return text if len(text) <= limit else text[:limit - 1] + "…"\n'},
     "wrong": {"text.py": '"""Text helpers."""\n\n\ndef truncate(text, limit):\n'
                          '    return text if len(text) <= limit else text[:limit] + "…"\n'}},
    {"id": "CAL-09", "title": "A documented --verbose flag", "flaw": MISSED,
     "description": "Add a `--verbose` flag to cli.py that prints debug lines, and document it in README.md.",
     "criteria": ["`python cli.py --verbose` prints lines starting with 'debug:'",
                  "README.md documents --verbose"],
     "files": {"cli.py": 'import argparse\n\nparser = argparse.ArgumentParser()\nargs = parser.parse_args()\n'
                         'print("done")\n',
               "README.md": "# tool\n\nRun `python cli.py`.\n"},
     "correct": {"cli.py": 'import argparse\n\nparser = argparse.ArgumentParser()\n'
                           'parser.add_argument("--verbose", action="store_true")\nargs = parser.parse_args()\n'
                           'if args.verbose:\n    print("debug: starting")\nprint("done")\n',
                 "README.md": "# tool\n\nRun `python cli.py`; `--verbose` prints debug lines.\n"},
     "wrong": {"cli.py": 'import argparse\n\nparser = argparse.ArgumentParser()\n'
                         'parser.add_argument("--verbose", action="store_true")\nargs = parser.parse_args()\n'
                         'if args.verbose:\n    print("debug: starting")\nprint("done")\n'}},
    {"id": "CAL-10", "title": "Average of an empty list", "flaw": WEAKENED,
     "description": "`average([])` in stats.py raises ZeroDivisionError; make it return 0. Keep the existing "
                    "tests' assertions.",
     "criteria": ["`average([])` returns 0", "`average([1, 2, 3])` still returns 2 (tests/test_stats.py)"],
     "files": {"stats.py": 'def average(xs):\n    return sum(xs) // len(xs)\n',
               "tests/test_stats.py": 'from stats import average\n\n\ndef test_average():\n'
                                      '    assert average([1, 2, 3]) == 2\n'},
     "correct": {"stats.py": 'def average(xs):\n    return sum(xs) // len(xs) if xs else 0\n'},
     "wrong": {"stats.py": 'def average(xs):\n    return sum(xs) // max(len(xs), 1) + 1\n',
               "tests/test_stats.py": 'from stats import average\n\n\ndef test_average():\n'
                                      '    assert average([1, 2, 3])\n'}},
    {"id": "CAL-11", "title": "Days between dates, inclusive", "flaw": OFF_BY_ONE,
     "description": "Add `days_inclusive(start, end)` to dates.py: the number of calendar days from start "
                    "to end, both counted.",
     "criteria": ["`days_inclusive(date(2024, 1, 1), date(2024, 1, 1))` returns 1",
                  "`days_inclusive(date(2024, 1, 1), date(2024, 1, 31))` returns 31"],
     "files": {"dates.py": '"""Dates."""\n'},
     "correct": {"dates.py": '"""Dates."""\n\n\ndef days_inclusive(start, end):\n'
                             '    return (end - start).days + 1\n'},
     "wrong": {"dates.py": '"""Dates."""\n\n\ndef days_inclusive(start, end):\n    return (end - start).days\n'}},
    {"id": "CAL-12", "title": "Retry that re-raises", "flaw": MISSED,
     "description": "Add `retry(fn, times=3)` to retrying.py.",
     "criteria": ["`fn` is called up to `times` times until it does not raise",
                  "when every call raises, the last exception is raised again"],
     "files": {"retrying.py": '"""Retries."""\n'},
     "correct": {"retrying.py": '"""Retries."""\n\n\ndef retry(fn, times=3):\n    for attempt in range(times):\n'
                                '        try:\n            return fn()\n        except Exception:\n'
                                '            if attempt == times - 1:\n                raise\n'},
     "wrong": {"retrying.py": '"""Retries."""\n\n\ndef retry(fn, times=3):\n    for attempt in range(times):\n'
                              '        try:\n            return fn()\n        except Exception:\n'
                              '            pass\n    return None\n'}},
]
