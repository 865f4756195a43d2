"""The audit of a sealed OpenTelemetry GenAI trace record: each check, what it passes with and
what it fails with (the code, the words, the span, the exact pointer)."""

from __future__ import annotations

import copy
import json

import pytest

from core import errors
from core.formats.otel import record as rec
from core.formats.otel.audit import CHECKS, NO_CONTENT, audit, same_json
from core.formats.protocol import VerifyContext
from core.replay.diff import MISSING
from core.replay.report import DIVERGED, OK, REFUSED, TAMPER_DETECTED
from tests.otel.spans import (
    CALL,
    RESULT,
    T0,
    TRACE_ID,
    agent_run,
    fixture_record,
    fixture_sets,
    resealed,
    sealed,
    span,
    text,
    usage,
)

# agent_run() as sealed: 0 invoke_agent, 1 chat (asks get_weather), 2 execute_tool, 3 chat
AGENT, ASKS, TOOL, ANSWERS = 0, 1, 2, 3


def _document() -> dict:
    return copy.deepcopy(sealed().document)


def _names(report) -> list[str]:
    return [c.name for c in report.checks]


def test_a_sealed_agent_run_passes_every_check_in_order():
    report = audit(sealed())
    assert (report.status, report.error_code, report.authoritative) == (OK, None, True)
    assert _names(report) == [n for n in CHECKS if n != "halts"]
    assert all(c.ok for c in report.checks)
    details = {c.name: c.detail for c in report.checks}
    assert details["format"] == (
        "an OpenTelemetry GenAI trace record (otel_genai 1) of trace "
        f"{TRACE_ID}: version 1, 4 spans, content full"
    )
    assert details["span_tree"] == (
        "one root span, /spans/0 ('invoke_agent weather-agent'); 4 spans, each parent present, "
        "no cycle, each span within its parent's time"
    )
    assert details["tool_round_trips"] == (
        "1 tool call: each ran as an execute_tool span with the arguments the model asked for; "
        "1 result reached the next model call unchanged"
    )
    assert details["conversation"] == (
        "2 model calls in 1 conversation: each of 1 later call carries the earlier call's input "
        "and output messages in order, and no tool response twice"
    )
    assert details["usage"] == (
        "total_tokens is input_tokens + output_tokens on 3 spans; the usage of 1 agent span is "
        "the sum of its model calls'"
    )
    assert report.stats == {"spans": 4, "model_calls": 2, "tool_calls": 1}
    assert report.trace_id == TRACE_ID
    assert report.format == "otel-genai"


def test_the_halts_check_comes_second_when_the_ledger_was_read():
    report = audit(sealed(), ctx=VerifyContext(halted={}))
    assert _names(report) == list(CHECKS)
    assert report.checks[1].detail == "no active halt on this file"


def test_a_halted_trace_is_refused():
    report = audit(sealed(), ctx=VerifyContext(halted={TRACE_ID: "seq 4: incident 7"}))
    assert (report.status, report.error_code) == (REFUSED, errors.FORCE_HALT_ACTIVE)
    assert report.message == "replay is halted until a council FORCE_HALT_CLEAR: seq 4: incident 7"


# --- 3. seal ---------------------------------------------------------------------------------


def test_a_changed_byte_breaks_the_seal_with_both_digests():
    record = sealed()
    data = record.data.replace(b"What is the weather in Paris?", b"What is the weather in Paros?")
    assert data != record.data
    changed = rec.parse(data)
    report = audit(changed)
    assert (report.status, report.error_code) == (TAMPER_DETECTED, errors.INTEGRITY_FAILURE)
    assert _names(report) == ["format", "seal"]
    assert report.expected == record.digest
    assert report.observed == changed.digest != record.digest
    assert report.message == (
        f"the record does not hash to its seal: seal.digest is {record.digest}, the record's "
        f"JCS bytes without the seal hash to {changed.digest}; the record was changed after it "
        "was sealed"
    )


def test_a_changed_seal_digest_is_caught_too():
    doc = _document()
    doc["seal"]["digest"] = "sha256:" + "0" * 64
    report = audit(rec.parse(json.dumps(doc).encode()))
    assert report.error_code == errors.INTEGRITY_FAILURE
    assert report.expected == "sha256:" + "0" * 64


def test_the_seal_detail_says_when_and_why_it_was_sealed():
    record = sealed()
    assert audit(record).checks[1].detail == (
        f"seal.digest {record.digest} recomputes over the record's JCS bytes (RFC 8785), the "
        "seal left out; sealed at 2025-06-01T12:00:00.000Z (quiet)"
    )


# --- 4. span tree ----------------------------------------------------------------------------


def _tree_failure(change, verdict=(TAMPER_DETECTED, errors.INTEGRITY_FAILURE)) -> tuple:
    doc = _document()
    change(doc["spans"])
    report = audit(resealed(doc))
    assert (report.status, report.error_code) == verdict
    assert _names(report) == ["format", "seal", "span_tree"]
    return report.broke_at, report.message


def test_a_missing_parent_names_the_span_and_the_trace_incomplete():
    def change(spans):
        spans[TOOL]["parent_span_id"] = "00000000000000ff"

    assert _tree_failure(change, ("refused", errors.INCOMPLETE_TRACE)) == (
        TOOL,
        "span /spans/2 ('execute_tool get_weather') names its parent 00000000000000ff, which is "
        "not in the trace (/spans/2/parent_span_id): the trace is incomplete",
    )


def test_two_roots_name_the_second():
    def change(spans):
        spans[ANSWERS]["parent_span_id"] = None

    assert _tree_failure(change) == (
        ANSWERS,
        "2 root spans: /spans/0 ('invoke_agent weather-agent') and /spans/3 ('chat gpt-4o-mini') "
        "both have no parent; a trace has one root",
    )


def test_a_cycle_names_its_first_span():
    def change(spans):
        spans[ASKS]["parent_span_id"] = spans[TOOL]["span_id"]
        spans[TOOL]["parent_span_id"] = spans[ASKS]["span_id"]

    assert _tree_failure(change) == (
        ASKS,
        "span /spans/1 ('chat gpt-4o-mini') is its own ancestor: its parents form a cycle "
        "(/spans/1 -> /spans/2 -> /spans/1)",
    )


def test_a_root_in_a_cycle_of_one():
    def change(spans):
        spans[AGENT]["parent_span_id"] = spans[AGENT]["span_id"]

    assert _tree_failure(change)[0] == AGENT


def test_a_child_outside_its_parent_s_time_names_the_span():
    def change(spans):
        spans[ANSWERS]["end_time_unix_nano"] = str(T0 + 150 * 1_000_000)

    assert _tree_failure(change) == (
        ANSWERS,
        "span /spans/3 ('chat gpt-4o-mini') runs from 2025-06-01T10:00:00.060000Z to "
        "2025-06-01T10:00:00.150000Z, outside its parent /spans/0 ('invoke_agent "
        "weather-agent'), which runs from 2025-06-01T10:00:00.000000Z to "
        "2025-06-01T10:00:00.100000Z",
    )


def test_a_span_that_ends_before_it_starts():
    def change(spans):
        spans[TOOL]["end_time_unix_nano"] = str(T0 + 44 * 1_000_000)

    broke_at, message = _tree_failure(change)
    assert broke_at == TOOL
    assert message.startswith("span /spans/2 ('execute_tool get_weather') ends before it starts")


def test_a_span_id_twice():
    def change(spans):
        spans[ANSWERS]["span_id"] = spans[ASKS]["span_id"]

    assert _tree_failure(change) == (
        ANSWERS,
        "span id 00000000000000b2 appears twice: /spans/1 ('chat gpt-4o-mini') and /spans/3 "
        "('chat gpt-4o-mini')",
    )


# --- 5. messages schema ----------------------------------------------------------------------


def test_messages_that_do_not_follow_the_conventions_are_malformed():
    doc = _document()
    del doc["spans"][ANSWERS]["output_messages"][0]["finish_reason"]
    report = audit(resealed(doc))
    assert (report.status, report.error_code) == (REFUSED, errors.MALFORMED_TRACE)
    assert _names(report)[-1] == "messages_schema"
    assert not report.checks[-1].ok
    assert report.broke_at == ANSWERS
    assert report.message == (
        "output_messages of span /spans/3 ('chat gpt-4o-mini') do not follow the GenAI "
        "conventions' schema (gen-ai-output-messages.json): at /spans/3/output_messages/0: "
        "'finish_reason' is a required property"
    )


def test_a_part_without_a_type_is_named_by_its_pointer():
    doc = _document()
    doc["spans"][ASKS]["input_messages"][0]["parts"][0] = {"content": "hi"}
    report = audit(resealed(doc))
    assert report.error_code == errors.MALFORMED_TRACE
    assert "at /spans/1/input_messages/0/parts/0: 'type' is a required property" in report.message


def test_system_instructions_are_validated():
    doc = _document()
    doc["spans"][ASKS]["system_instructions"] = [{"type": 3}]
    report = audit(resealed(doc))
    assert report.error_code == errors.MALFORMED_TRACE
    assert report.message.startswith(
        "system_instructions of span /spans/1 ('chat gpt-4o-mini') do not follow the GenAI "
        "conventions' schema (gen-ai-system-instructions.json): at "
        "/spans/1/system_instructions/0"
    )


# --- 6. tool round trips ---------------------------------------------------------------------


def test_a_tampered_tool_result_diverges_at_the_exact_pointer():
    doc = _document()
    doc["spans"][ANSWERS]["input_messages"][2]["parts"][0]["response"] = {
        "temperature": 35,
        "unit": "celsius",
    }
    report = audit(resealed(doc))
    assert (report.status, report.error_code) == (DIVERGED, errors.REPLAY_DIVERGENCE)
    assert _names(report)[-1] == "tool_round_trips"
    (d,) = report.divergences
    assert (d.step, d.step_id, d.path) == (
        ANSWERS,
        "00000000000000c3",
        "/spans/3/input_messages/2/parts/0/response",
    )
    assert d.before == RESULT
    assert d.after == {"temperature": 35, "unit": "celsius"}
    assert report.broke_at == ANSWERS
    assert report.message == (
        "model call /spans/3 ('chat gpt-4o-mini') received another result of tool "
        "'get_weather' (call id call_1) than the tool returned: /spans/2/tool/result is "
        '{"temperature": 22, "unit": "celsius"}, /spans/3/input_messages/2/parts/0/response is '
        '{"temperature": 35, "unit": "celsius"}'
    )


def test_a_tool_call_without_an_execute_tool_span():
    spans = [s for s in agent_run() if s["operation"] != "execute_tool"]
    report = audit(sealed(spans))
    assert report.error_code == errors.REPLAY_DIVERGENCE
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (
        ASKS,
        "/spans/1/output_messages/0/parts/0",
        CALL,
        MISSING,
    )
    assert report.message == (
        "model call /spans/1 ('chat gpt-4o-mini') asked for tool 'get_weather' (call id call_1) "
        "at /spans/1/output_messages/0/parts/0, but no execute_tool span with call id call_1 "
        "is in the trace"
    )
    assert d.to_json()["absent"] == "after"


def test_a_tool_that_ran_with_other_arguments():
    doc = _document()
    doc["spans"][TOOL]["tool"]["arguments"] = {"city": "Lyon"}
    report = audit(resealed(doc))
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (
        TOOL,
        "/spans/2/tool/arguments",
        {"city": "Paris"},
        {"city": "Lyon"},
    )


def test_a_result_that_never_reached_the_next_call():
    doc = _document()
    doc["spans"][ANSWERS]["input_messages"].pop()
    report = audit(resealed(doc))
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (
        ANSWERS,
        "/spans/3/input_messages",
        RESULT,
        MISSING,
    )
    assert "never reached the next model call /spans/3" in report.message


def test_arguments_and_results_given_as_json_strings_are_compared_as_json():
    doc = _document()
    doc["spans"][TOOL]["tool"]["result"] = json.dumps(RESULT, indent=2)
    doc["spans"][ASKS]["output_messages"][0]["parts"][0]["arguments"] = '{"city":"Paris"}'
    doc["spans"][ANSWERS]["input_messages"][1]["parts"][0]["arguments"] = '{"city":"Paris"}'
    report = audit(resealed(doc))
    assert report.status == OK, report.message
    assert same_json(1, 1.0)
    assert not same_json("1", 1)
    assert same_json("[1, 2]", [1, 2])


def test_a_tool_span_without_arguments_or_result_is_not_compared_and_says_so():
    doc = _document()
    doc["spans"][TOOL]["tool"].update(arguments=None, result=None)
    report = audit(resealed(doc))
    assert report.status == OK
    assert report.checks[-3].detail == (
        "1 tool call: each ran as an execute_tool span with the arguments the model asked for; "
        "1 tool span recorded no arguments (not compared); 1 tool span recorded no result "
        "(not compared)"
    )


def test_tool_calls_without_ids_are_matched_by_name_and_order():
    spans = agent_run()
    for s in spans:
        for m in (s["input_messages"] or []) + (s["output_messages"] or []):
            for p in m["parts"]:
                p.pop("id", None)
                if p["type"] != "text":
                    p["id"] = None
        if s["tool"]:
            s["tool"]["call_id"] = None
    assert audit(sealed(spans)).status == OK
    spans[0]["input_messages"][2]["parts"][0]["response"] = {"temperature": 0}
    report = audit(sealed(spans))
    assert [d.path for d in report.divergences] == ["/spans/3/input_messages/2/parts/0/response"]


# --- 7. conversation -------------------------------------------------------------------------


def test_a_tool_response_twice():
    doc = _document()
    messages = doc["spans"][ANSWERS]["input_messages"]
    messages.append(copy.deepcopy(messages[2]))
    report = audit(resealed(doc))
    assert _names(report)[-1] == "conversation"
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (
        ANSWERS,
        "/spans/3/input_messages/3/parts/0",
        MISSING,
        messages[2]["parts"][0],
    )
    assert report.message == (
        "model call /spans/3 ('chat gpt-4o-mini') received the response to tool call call_1 "
        "twice: at /spans/3/input_messages/2/parts/0 and at /spans/3/input_messages/3/parts/0"
    )


def test_an_earlier_message_changed_in_a_later_call():
    doc = _document()
    doc["spans"][ANSWERS]["input_messages"][0] = text("user", "What is the weather in Rome?")
    report = audit(resealed(doc))
    (d,) = report.divergences
    assert (d.step, d.path) == (ANSWERS, "/spans/3/input_messages/0")
    assert d.before == text("user", "What is the weather in Paris?")
    assert d.after == text("user", "What is the weather in Rome?")
    assert report.message.startswith(
        "model call /spans/3 ('chat gpt-4o-mini') does not carry /spans/1/input_messages/0 "
    )


def test_the_model_s_output_missing_from_the_next_call():
    doc = _document()
    del doc["spans"][ANSWERS]["input_messages"][1]
    report = audit(resealed(doc))
    # the tool response is there; the assistant message that asked for it is not
    (d,) = report.divergences
    assert d.path == "/spans/3/input_messages/1"
    assert d.before == {"role": "assistant", "parts": [CALL]}
    assert "does not carry /spans/1/output_messages/0" in report.message


def test_a_later_call_may_carry_more_messages_in_between():
    doc = _document()
    doc["spans"][ANSWERS]["input_messages"].insert(1, text("user", "In Celsius, please."))
    assert audit(resealed(doc)).status == OK


def test_conversations_are_followed_by_their_ids():
    first = agent_run()
    second = [s for s in agent_run() if s["parent_span_id"]]  # under the first run's root
    for s in first:
        s["conversation_id"] = "conv-a"
    for s in second:
        s["span_id"] = "11" + s["span_id"][2:]
        s["start_time_unix_nano"] = str(int(s["start_time_unix_nano"]) + 1)
        s["end_time_unix_nano"] = str(int(s["end_time_unix_nano"]) + 1)
        s["conversation_id"] = "conv-b"
        if s["tool"]:
            s["tool"]["call_id"] = "call_2"
        for m in (s["input_messages"] or []) + (s["output_messages"] or []):
            for p in m["parts"]:
                if "id" in p:
                    p["id"] = "call_2"
    first[1]["usage"] = None  # the agent's usage no longer sums its (now four) model calls
    report = audit(sealed(first + second))
    assert report.status == OK, report.message
    assert report.checks[-2].detail.startswith("4 model calls in 2 conversations: each of 2 ")


def test_model_calls_take_the_conversation_id_of_their_agent():
    root = span("00000000000000f0", "workflow", start=0, end=300)
    first, second = agent_run(), agent_run()
    for s in second:
        s["span_id"] = "11" + s["span_id"][2:]
        if s["parent_span_id"]:
            s["parent_span_id"] = "11" + s["parent_span_id"][2:]
        for key in ("start_time_unix_nano", "end_time_unix_nano"):
            s[key] = str(int(s[key]) + 150 * 1_000_000)
        if s["tool"]:
            s["tool"]["call_id"] = "call_2"
        for m in (s["input_messages"] or []) + (s["output_messages"] or []):
            for p in m["parts"]:
                if "id" in p:
                    p["id"] = "call_2"
    for run, conversation in ((first, "conv-a"), (second, "conv-b")):
        agent = next(s for s in run if s["operation"] == "invoke_agent")
        agent["parent_span_id"] = root["span_id"]
        agent["conversation_id"] = conversation
    # the second agent's first call starts a new conversation: it carries nothing of the first
    report = audit(sealed([root, *first, *second]))
    assert report.status == OK, report.message
    assert report.checks[-2].detail.startswith("4 model calls in 2 conversations: each of 2 ")
    # without the agents' ids, the four calls are one conversation, which the second breaks
    for s in (*first, *second):
        s["conversation_id"] = None
    report = audit(sealed([root, *first, *second]))
    assert report.error_code == errors.REPLAY_DIVERGENCE
    assert report.divergences[0].path == "/spans/6/input_messages/1"


# --- content-free traces ------------------------------------------------------------------------


def test_a_content_free_trace_runs_only_the_structural_checks_and_says_why():
    record = sealed(agent_run(content=False))
    assert record.content == "none"
    report = audit(record)
    assert report.status == OK
    details = {c.name: c.detail for c in report.checks}
    for name in ("messages_schema", "tool_round_trips", "conversation"):
        assert details[name] == (
            "not checked: the trace was captured without message content (the "
            "instrumentations' default)"
        )
    assert details["conversation"] == NO_CONTENT
    assert details["usage"].startswith("total_tokens is input_tokens + output_tokens on 3 spans")


def test_a_content_free_trace_still_fails_on_usage():
    spans = agent_run(content=False)
    spans[0]["usage"] = usage(30, 8, 40)
    report = audit(sealed(spans))
    assert (report.error_code, _names(report)[-1]) == (errors.REPLAY_DIVERGENCE, "usage")


# --- 8. usage --------------------------------------------------------------------------------


def test_a_total_that_is_not_input_plus_output():
    doc = _document()
    doc["spans"][ASKS]["usage"]["total_tokens"] = 33
    report = audit(resealed(doc))
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (ASKS, "/spans/1/usage/total_tokens", 32, 33)
    assert report.message == (
        "span /spans/1 ('chat gpt-4o-mini') reports total_tokens 33, but its input_tokens 20 "
        "and output_tokens 12 make 32"
    )


def test_an_agent_whose_usage_is_not_the_sum_of_its_model_calls():
    doc = _document()
    doc["spans"][AGENT]["usage"] = usage(51, 20)
    report = audit(resealed(doc))
    (d,) = report.divergences
    assert (d.step, d.path, d.before, d.after) == (AGENT, "/spans/0/usage/input_tokens", 50, 51)
    assert report.message == (
        "agent span /spans/0 ('invoke_agent weather-agent') reports input_tokens 51, but its 2 "
        "model calls report 50 in all (20 + 30)"
    )


def test_usage_not_given_is_not_checked():
    doc = _document()
    doc["spans"][AGENT]["usage"] = usage(None, 20, None)
    doc["spans"][ASKS]["usage"] = usage(20, None, None)
    report = audit(resealed(doc))
    assert report.status == OK
    assert report.checks[-1].detail == "total_tokens is input_tokens + output_tokens on 1 span"


def test_a_trace_without_model_calls():
    root = span("00000000000000a1", "GET /health", kind="server")
    report = audit(sealed([root]))
    assert report.status == OK
    details = {c.name: c.detail for c in report.checks}
    assert details["tool_round_trips"] == "no model call asked for a tool"
    assert details["conversation"] == "no model calls"
    assert details["usage"] == (
        "nothing to check: no span reports input, output and total tokens, and no agent span a "
        "usage its model calls report"
    )
    assert details["messages_schema"] == (
        "no span carries messages: valid against the GenAI conventions' JSON schemas"
    )


# --- the real instrumentations' captured exports ------------------------------------------------


@pytest.mark.parametrize("name", [n for n in fixture_sets() if n != "openai-v2-divergent"])
def test_a_captured_run_passes_the_audit(name):
    record = fixture_record(name)
    report = audit(record)
    assert report.status == OK, report.message
    details = {c.name: c.detail for c in report.checks}
    if record.content == "none":
        assert details["tool_round_trips"] == NO_CONTENT
    elif name != "none":
        assert details["tool_round_trips"].startswith(
            "1 tool call: each ran as an execute_tool span with the arguments the model asked "
            "for; 1 result reached the next model call unchanged"
        )
        assert details["conversation"].startswith(
            "2 model calls in 1 conversation: each of 1 later call carries the earlier call's "
            "input and output messages in order"
        )
    assert (
        details["usage"].endswith("the usage of 1 agent span is the sum of its model calls'")
        or name == "none"
    )


def test_a_captured_run_whose_tool_result_was_changed_before_the_model_saw_it():
    """The fixture's client handed the model another result than its tool span records."""
    record = fixture_record("openai-v2-divergent")
    report = audit(record)
    assert (report.status, report.error_code) == (DIVERGED, errors.REPLAY_DIVERGENCE)
    (d,) = report.divergences
    assert d.path == "/spans/3/input_messages/3/parts/0/response"
    assert d.before == {"city": "Paris", "conditions": "sunny", "temperature_c": 21}
    assert d.after == {"city": "Paris", "conditions": "sunny", "temperature_c": 18}
    assert record.spans[2]["tool"]["result"] == d.before
    assert report.message == (
        "model call /spans/3 ('chat gpt-4o-mini') received another result of tool "
        "'get_weather' (call id call_fake_weather_paris) than the tool returned: "
        '/spans/2/tool/result is {"city": "Paris", "conditions": "sunny", "temperature_c": 21}, '
        "/spans/3/input_messages/3/parts/0/response is "
        '{"city": "Paris", "conditions": "sunny", "temperature_c": 18}'
    )


def test_a_captured_run_with_a_changed_byte_is_tampered():
    record = fixture_record("openinference")
    data = record.data.replace(b"Paris", b"Paros", 1)
    report = audit(rec.parse(data))
    assert report.error_code == errors.INTEGRITY_FAILURE
    assert (report.expected, report.observed) == (record.digest, rec.parse(data).digest)


def test_openllmetry_s_empty_text_part_before_a_streamed_tool_call_is_not_a_divergence():
    record = fixture_record("openllmetry-stream")
    asked = record.spans[1]["output_messages"][0]["parts"]
    assert asked[0] == {"type": "text", "content": ""}
    assert audit(record).status == OK
