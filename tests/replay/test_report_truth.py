"""Verdicts an auditor can trust (issue 8): every report prints, a consumed external output is
checked against what consumed it, sandbox mocks feed the later steps, and numbers equal only
within NUMERIC_EPSILON are said to be so.

The traces are recorded by the reference recorder and edited the way a drifted runtime (or a
forger holding the key) would, then re-sealed with the golden fixture key.
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.canonical import NUMERIC_EPSILON
from core.errors import INTEGRITY_FAILURE, REPLAY_DIVERGENCE, RESULT_MISMATCH
from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import record, reseal
from core.replay.registry import Registry, Runtime
from core.replay.runtime import (
    RUNTIME_NAME,
    RecordOptions,
    ReferenceMaterialiser,
    answer_compose_v1,
    final_answer_v1,
    register,
    router_decide_v1,
)
from replay.services import replay_run_create, replay_run_execute, trace_ingest
from tests.replay.helpers import golden_key_ring, golden_signer

KEYS = golden_key_ring()
SIGNER = golden_signer()
REGISTRY = default_registry()


def recorded(seed: str = "truth", **kw: Any) -> dict[str, Any]:
    return record(RecordOptions(seed=seed, **kw), REGISTRY, SIGNER)


def replay_doc(
    document: dict[str, Any], mode: str = engine.AUDIT, registry: Registry = REGISTRY
) -> dict[str, Any]:
    trace = native.open_native(io.BytesIO(native.dumps_document(document)), "t.trace.json")
    return engine.replay(trace, mode=mode, registry=registry, keys=KEYS).to_json()


def run(command: str, *args: str) -> tuple[int, str, str]:
    """call_command: (exit code, stdout, stderr); CommandError and sys.exit become codes."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), str(exc)
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def with_extra_step_key() -> dict[str, Any]:
    """Step 3's recorded routing decision carries a key the runtime no longer produces."""
    document = copy.deepcopy(recorded())
    document["steps"][3]["output"]["reason"] = "cheapest"
    return reseal(document, SIGNER)


def without_step_key() -> dict[str, Any]:
    """Step 3's recorded routing decision lacks a score the runtime produces."""
    document = copy.deepcopy(recorded())
    del document["steps"][3]["output"]["scores"]["plan"]
    return reseal(document, SIGNER)


def without_final_key() -> dict[str, Any]:
    """The stored final answer lacks a key the recomputed one has."""
    document = copy.deepcopy(recorded())
    del document["final_answer"]["route"]
    return reseal(document, SIGNER)


# --- 2. every report can be printed ----------------------------------------------------------

STEP_ABSENT = {
    "step": 3,
    "step_id": "route-1",
    "path": "/reason",
    "before": "cheapest",
    "after": None,
    "absent": "after",
}


def test_it_spells_a_key_the_recomputed_output_lacks_as_absent_after():
    report = replay_doc(with_extra_step_key())

    assert (report["status"], report["error_code"]) == ("diverged", REPLAY_DIVERGENCE)
    assert report["divergences"] == [STEP_ABSENT]
    assert json.loads(json.dumps(report)) == report


def test_it_spells_a_key_the_stored_final_answer_lacks_as_absent_before():
    report = replay_doc(without_final_key())

    assert (report["status"], report["error_code"]) == ("diverged", RESULT_MISMATCH)
    [divergence] = report["divergences"]
    assert divergence == {
        "step": "final_answer",
        "step_id": "final_answer",
        "path": "/route",
        "before": None,
        "after": divergence["after"],
        "absent": "before",
    }
    assert divergence["after"] in ("search", "math", "write", "plan")
    assert json.loads(json.dumps(report)) == report


def test_it_keeps_a_real_null_apart_from_an_absent_value():
    document = copy.deepcopy(recorded())
    document["steps"][3]["output"]["route"] = None
    report = replay_doc(reseal(document, SIGNER))

    [divergence] = report["divergences"]
    assert divergence["before"] is None
    assert "absent" not in divergence  # null was recorded: both sides exist


STEP_ABSENT_BEFORE = {
    "step": 3,
    "step_id": "route-1",
    "path": "/scores/plan",
    "before": None,
    "after": 0.328952568,
    "absent": "before",
}


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
@pytest.mark.parametrize(
    ("make", "code", "divergence", "line"),
    [
        (
            with_extra_step_key,
            REPLAY_DIVERGENCE,
            STEP_ABSENT,
            '  diverged at step 3 /reason: "cheapest" -> (absent)',
        ),
        (
            without_step_key,
            REPLAY_DIVERGENCE,
            STEP_ABSENT_BEFORE,
            "  diverged at step 3 /scores/plan: (absent) -> 0.328952568",
        ),
        (without_final_key, RESULT_MISMATCH, None, None),
    ],
)
def test_it_refuses_nothing_verify_and_replay_json_print_a_one_sided_divergence(
    tmp_path: Path, make, code, divergence, line
):
    path = tmp_path / "drifted.trace.json"
    path.write_bytes(native.dumps_document(make()))

    exit_code, out, _ = run("verify", str(path), "--json")
    assert exit_code == 1
    verified = json.loads(out)
    assert verified["error_code"] == code
    if divergence is not None:
        assert verified["divergences"] == [divergence]

    exit_code, out, _ = run("replay", str(path), "--mode", "audit", "--json")
    assert exit_code == 1
    replayed = json.loads(out)
    assert replayed["error_code"] == code
    assert replayed["divergences"] == verified["divergences"]

    exit_code, out, _ = run("verify", str(path))
    assert exit_code == 1
    if line is None:
        after = replayed["divergences"][0]["after"]
        line = f'  diverged at step final_answer /route: (absent) -> "{after}"'
    assert out.splitlines()[-1] == line


# --- 3. a consumed external output is checked against what consumed it -----------------------


def with_swapped_output(ref: str = "out-0001", persist: bool = True) -> dict[str, Any]:
    """A forger with the key swaps a persisted LLM output, re-hashes it and re-seals; the step
    that consumed the output still records the original's hash."""
    document = copy.deepcopy(recorded())
    forged = {"text": "[math] a forged answer", "tokens": 7}
    document["outputs"][ref] = {"content": forged, "hash": native.output_hash_of(forged)}
    if not persist:
        del document["outputs"][ref]["content"]
    return reseal(document, SIGNER)


@pytest.mark.parametrize("mode", [engine.PRODUCTION, engine.AUDIT, engine.SANDBOX])
def test_it_refuses_a_persisted_output_that_is_not_the_one_its_step_consumed(mode):
    original = recorded()
    document = with_swapped_output()
    consumed = original["steps"][5]["input"]["output_hash"]
    assert consumed == original["outputs"]["out-0001"]["hash"]
    swapped = document["outputs"]["out-0001"]["hash"]

    report = replay_doc(document, mode)

    assert (report["status"], report["error_code"]) == ("tamper_detected", INTEGRITY_FAILURE)
    assert (report["broke_at"], report["expected"], report["observed"]) == (5, consumed, swapped)
    message = (
        f"output 'out-0001' of step 4 (agent-1): its recorded hash {swapped} is not the hash "
        f"{consumed} that step 5 (answer-1) consumed"
    )
    assert report["message"] == message
    assert [c for c in report["checks"] if not c["ok"]] == [
        {"name": "outputs", "ok": False, "detail": message}
    ]
    assert "steps" not in [c["name"] for c in report["checks"]]


def test_it_checks_the_output_a_step_names_by_its_output_ref():
    document = copy.deepcopy(recorded())
    # step 8 names out-0000 explicitly, so it consumed that output, not the latest one
    document["steps"][8]["input"]["output_ref"] = "out-0000"
    report = replay_doc(reseal(document, SIGNER))

    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["broke_at"] == 8
    assert report["expected"] == document["steps"][8]["input"]["output_hash"]
    assert report["observed"] == document["outputs"]["out-0000"]["hash"]
    assert "output 'out-0000' of step 1 (agent-0)" in report["message"]


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
def test_a_stored_production_replay_refuses_a_swapped_output():
    document = with_swapped_output()
    data = native.dumps_document(document)
    trace = trace_ingest(source=io.BytesIO(data), filename="swapped.trace.json").trace

    run = replay_run_execute(run_id=replay_run_create(trace=trace, mode=engine.PRODUCTION).id)

    assert (run.status, run.error_code, run.authoritative) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        True,
    )
    assert (run.report["broke_at"], run.report["expected"], run.report["observed"]) == (
        5,
        document["steps"][5]["input"]["output_hash"],
        document["outputs"]["out-0001"]["hash"],
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
def test_production_verify_refuses_a_swapped_output_on_the_command_line(tmp_path: Path):
    path = tmp_path / "swapped.trace.json"
    path.write_bytes(native.dumps_document(with_swapped_output()))

    exit_code, out, _ = run("verify", str(path), "--mode", "production", "--json")

    assert exit_code == 1
    report = json.loads(out)
    assert (report["error_code"], report["broke_at"]) == (INTEGRITY_FAILURE, 5)


# --- 4. sandbox mocks are used (REPLAY-07) ----------------------------------------------------


def substitutions(document: dict[str, Any], hashes: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "output_ref": step["output_ref"],
            "step": step["seq"],
            "hash": hashes[step["output_ref"]],
            "matches_recorded": hashes[step["output_ref"]]
            == document["outputs"][step["output_ref"]]["hash"],
        }
        for step in document["steps"]
        if step["kind"] == "external"
    ]


def test_the_reference_mock_reproduces_the_recorders_agent_and_feeds_the_later_steps():
    document = recorded("sandbox", persist_outputs=False)
    recorded_hashes = {ref: o["hash"] for ref, o in document["outputs"].items()}

    report = replay_doc(document, engine.SANDBOX)

    assert (report["status"], report["error_code"], report["authoritative"]) == ("ok", None, False)
    assert report["substituted"] == substitutions(document, recorded_hashes)
    assert all(s["matches_recorded"] for s in report["substituted"])
    [steps] = [c for c in report["checks"] if c["name"] == "steps"]
    assert steps == {
        "name": "steps",
        "ok": True,
        "detail": "9 steps replayed; sandbox mocks stood in for out-0000 (step 1), out-0001 "
        "(step 4), out-0002 (step 7) and fed the steps that consumed them (non-authoritative)",
    }


def test_a_mock_that_answers_otherwise_diverges_at_the_step_that_consumed_it():
    document = recorded("sandbox", persist_outputs=False)
    other = Registry()
    register(other)
    mocked = {"text": "a mock's own answer", "tokens": 3}
    other.register_mock("llm.complete", lambda _input, _rng: dict(mocked))
    mock_hash = native.output_hash_of(mocked)

    report = replay_doc(document, engine.SANDBOX, registry=other)

    assert (report["status"], report["error_code"]) == ("diverged", REPLAY_DIVERGENCE)
    assert report["authoritative"] is False
    assert report["broke_at"] == 2
    assert report["message"] == (
        "step 2 (answer-0, answer.compose@1): the recomputed output differs from the recorded "
        "one; its input's output_hash is the sandbox mock's output for 'out-0000' (step 1)"
    )
    route = document["steps"][2]["input"]["route"]
    [divergence] = report["divergences"]
    assert divergence == {
        "step": 2,
        "step_id": "answer-0",
        "path": "/answer",
        "before": document["steps"][2]["output"]["answer"],
        "after": f"{route}:{mock_hash.removeprefix('sha256:')[:16]}",
    }
    assert report["substituted"] == [
        {"output_ref": "out-0000", "step": 1, "hash": mock_hash, "matches_recorded": False}
    ]


def test_a_persisted_output_is_never_substituted_in_sandbox():
    report = replay_doc(recorded("sandbox"), engine.SANDBOX)

    assert (report["status"], report["authoritative"], report["substituted"]) == ("ok", False, [])


# --- 7. numbers equal only within NUMERIC_EPSILON (seed 003 §4) ------------------------------

MATH = 0.49185076  # step 3's recorded score for "math" in the trace of seed "truth"


def with_step3_math(value: float) -> dict[str, Any]:
    document = copy.deepcopy(recorded())
    assert document["steps"][3]["output"]["scores"]["math"] == MATH
    document["steps"][3]["output"]["scores"]["math"] = value
    return reseal(document, SIGNER)


def test_the_epsilon_is_seed_003s():
    assert NUMERIC_EPSILON == 1e-9


def test_it_reports_a_score_one_unit_off_in_the_ninth_decimal_as_equal_within_epsilon():
    # in binary floating point 0.491850761 - 0.49185076 is 1.0000000272e-09, more than
    # 1e-9: the comparison is made on the canonical decimal spellings, exactly
    assert 0.491850761 - MATH > NUMERIC_EPSILON
    report = replay_doc(with_step3_math(0.491850761))

    assert (report["status"], report["error_code"], report["divergences"]) == ("ok", None, [])
    assert report["within_epsilon"] == [
        {
            "step": 3,
            "step_id": "route-1",
            "path": "/scores/math",
            "before": 0.491850761,
            "after": MATH,
        }
    ]
    [steps] = [c for c in report["checks"] if c["name"] == "steps"]
    assert steps["detail"] == (
        "9 steps replayed; 1 value equal only within NUMERIC_EPSILON 1e-09 (step 3 /scores/math)"
    )


def test_it_reports_two_units_off_in_the_ninth_decimal_as_a_divergence():
    report = replay_doc(with_step3_math(0.491850762))

    assert (report["status"], report["error_code"]) == ("diverged", REPLAY_DIVERGENCE)
    assert report["divergences"] == [
        {
            "step": 3,
            "step_id": "route-1",
            "path": "/scores/math",
            "before": 0.491850762,
            "after": MATH,
        }
    ]
    assert report["within_epsilon"] == []


def test_a_float_that_rounds_to_the_recorded_nine_decimals_is_simply_equal():
    # 0.1 + 0.2 style: a different binary float with the same canonical spelling
    noisy = math.nextafter(MATH, 1.0)
    assert noisy != MATH
    report = replay_doc(with_step3_math(noisy))

    assert (report["status"], report["divergences"], report["within_epsilon"]) == ("ok", [], [])


def test_a_final_answer_within_epsilon_is_equal_and_said_to_be():
    def final_with_score(last: Any, count: int) -> Any:
        return {**final_answer_v1(last, count), "score": 0.1 + 0.2}

    other = Registry()
    register(other)
    other.register_runtime(
        Runtime(RUNTIME_NAME, materialiser=ReferenceMaterialiser, final_answer=final_with_score)
    )
    document = copy.deepcopy(record(RecordOptions(seed="final"), other, SIGNER))
    document["final_answer"]["score"] = 0.300000001
    report = replay_doc(reseal(document, SIGNER), registry=other)

    assert (report["status"], report["divergences"]) == ("ok", [])
    assert report["within_epsilon"] == [
        {
            "step": "final_answer",
            "step_id": "final_answer",
            "path": "/score",
            "before": 0.300000001,
            "after": 0.1 + 0.2,
        }
    ]
    [final] = [c for c in report["checks"] if c["name"] == "final_answer"]
    assert final["detail"] == (
        "recomputed final answer equals the stored one; 1 value equal only within "
        "NUMERIC_EPSILON 1e-09 (/score)"
    )


def test_a_missing_output_without_a_mock_is_named_in_the_steps_check():
    bare = Registry()  # the reference runtime's functions, and no sandbox stand-in
    bare.register("router.decide@1", router_decide_v1)
    bare.register("answer.compose@1", answer_compose_v1)
    bare.register_runtime(Runtime(RUNTIME_NAME, ReferenceMaterialiser, final_answer_v1))

    report = replay_doc(
        recorded("sandbox", iterations=1, persist_outputs=False), engine.SANDBOX, bare
    )

    assert (report["status"], report["authoritative"], report["substituted"]) == ("ok", False, [])
    [steps] = [c for c in report["checks"] if c["name"] == "steps"]
    assert steps["detail"] == (
        "3 steps replayed; no sandbox mock is registered for out-0000 (step 1, llm.complete): "
        "the steps that consumed it used its recorded hash"
    )
