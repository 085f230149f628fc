"""`tilth calibrate`: the configured evaluator over the shipped fixtures; the rates it prints are
what the evaluator decided (here the scripted backend's scenario)."""

from __future__ import annotations

import json

import pytest

from fake_openai import ACCEPT as FAKE_ACCEPT, reply

from tilth.cli.calibration_fixtures import FIXTURES, MISSED, OFF_BY_ONE, WEAKENED

ACCEPT, REJECT = {"verdict": {"verdict": "accept"}}, {"verdict": {"verdict": "reject", "category": "acceptance_gap"}}


def test_the_fixture_set_has_ten_tasks_each_with_a_correct_and_a_subtly_wrong_change():
    assert len(FIXTURES) >= 10 and len({f["id"] for f in FIXTURES}) == len(FIXTURES)
    assert {f["flaw"] for f in FIXTURES} == {OFF_BY_ONE, MISSED, WEAKENED}
    for f in FIXTURES:
        assert f["criteria"] and f["correct"] and f["wrong"] and f["correct"] != f["wrong"], f["id"]


def test_calibrate_prints_the_rates_the_scripted_evaluator_decides(sandbox):
    scenario = sandbox.write_json("scenario.json", {
        "default": [ACCEPT, REJECT],                       # a perfect evaluator
        "tasks": {"CAL-01": [ACCEPT, ACCEPT],              # a false accept
                  "CAL-02": [REJECT, REJECT],              # a false reject
                  "CAL-04": [REJECT, ACCEPT]}})            # both
    result = sandbox.tilth("calibrate", "--backend", "scripted", "--scenario", str(scenario))
    assert result.returncode == 0, result.stderr
    n = len(FIXTURES)
    assert f"False accepts: 2/{n} ({100 * 2 / n:.1f}%)" in result.stdout
    assert f"False rejects: 2/{n} ({100 * 2 / n:.1f}%)" in result.stdout
    assert f"({2 * n} verdicts, 0 model calls, $0.0000 in all)" in result.stdout
    assert "  CAL-04   weakened_test     reject          accept" in result.stdout
    as_json = json.loads(sandbox.tilth("calibrate", "--backend", "scripted", "--scenario", str(scenario),
                                       "--only", "CAL-01", "--only", "CAL-03", "--json").stdout)
    assert (as_json["false_accepts"], as_json["wrong_judged"], as_json["false_rejects"]) == (1, 2, 0)
    assert [f["id"] for f in as_json["fixtures"]] == ["CAL-01", "CAL-03"]


@pytest.mark.slow
def test_calibrate_runs_a_model_evaluator_and_counts_its_calls(sandbox, fake, model_env):
    """The `openai` evaluator against the local server: it accepts the correct change and the wrong one."""
    fake.enqueue("evaluator", reply(tool_calls=[FAKE_ACCEPT]), reply(tool_calls=[FAKE_ACCEPT]))
    result = sandbox.tilth("calibrate", "--only", "CAL-01", "--json", env=model_env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert (out["verdicts"], out["model_calls"], out["false_accepts"], out["false_rejects"]) == (2, 2, 1, 0)
    assert "span(2, 5)" in json.dumps(fake.posts()[0]) and "range(a, b + 1)" in json.dumps(fake.posts()[0])
