"""One plain span dict (``otlp.decode``) -> one normalised span record: what the span says
about a GenAI operation, in the OpenTelemetry GenAI conventions' terms, whichever of three
dialects wrote it; and everything it carried, verbatim.

The dialects, as their emitters really write them (tests/otel/fixtures holds captured
bodies of each):

- ``gen_ai``: the GenAI semantic conventions. Latest: ``gen_ai.operation.name``,
  ``gen_ai.provider.name`` (formerly ``gen_ai.system``), ``gen_ai.request.*``,
  ``gen_ai.response.*``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` (formerly
  ``prompt_tokens`` / ``completion_tokens``), and the content attributes
  ``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
  ``gen_ai.tool.definitions`` (a JSON string, or the structured AnyValue the conventions
  prefer), ``gen_ai.tool.name`` / ``.call.id`` / ``.call.arguments`` / ``.call.result`` on
  ``execute_tool`` spans. Older: one span event per message (``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``) whose body is in its attributes (its fields, or the whole body as JSON in
  ``gen_ai.event.content``), and the older still ``gen_ai.content.prompt`` /
  ``gen_ai.content.completion`` events (``gen_ai.prompt`` / ``gen_ai.completion`` JSON).
- ``openinference`` (Arize): ``openinference.span.kind`` (LLM, TOOL, AGENT, ...); messages
  flattened into ``llm.input_messages.N.message.role`` / ``.content`` /
  ``.contents.M.message_content.*`` / ``.tool_calls.K.tool_call.{id,function.name,
  function.arguments}`` / ``.tool_call_id`` and ``llm.output_messages...``; ``llm.model_name``
  (the *response's* model for OpenAI: the requested one is only in
  ``llm.invocation_parameters``), ``llm.provider`` / ``llm.system``,
  ``llm.token_count.prompt`` / ``completion`` / ``total``, ``llm.finish_reason`` (the first
  choice's only), ``llm.tools.N.tool.json_schema``; TOOL spans: ``tool.name``,
  ``tool.parameters`` (the tool's parameter schema), ``input.value`` / ``output.value`` (the
  call's arguments and result; ``__REDACTED__`` when content is hidden); ``session.id``.
- ``openllmetry`` (Traceloop): since 0.5x the conventions' content attributes (above) plus
  its own ``gen_ai.is_streaming``, ``gen_ai.usage.total_tokens``, ``gen_ai.openai.api_base``;
  before, ``gen_ai.prompt.N.role`` / ``content`` / ``tool_call_id`` /
  ``tool_calls.M.{id,name,arguments}``, ``gen_ai.completion.N.role`` / ``content`` /
  ``finish_reason`` / ``tool_calls.M...``, ``llm.request.type``, ``llm.usage.total_tokens``,
  ``llm.request.functions.N.*``; and ``traceloop.span.kind`` / ``traceloop.entity.name`` /
  ``.input`` / ``.output`` on its workflow, task, agent and tool spans.

Messages always come out in the conventions' shape (gen-ai-input-messages.json,
gen-ai-output-messages.json): ``{"role", "parts", "name"?}``, outputs also
``"finish_reason"``; parts ``{"type": "text", "content"}``, ``{"type": "tool_call", "id",
"name", "arguments"}``, ``{"type": "tool_call_response", "id", "response"}``, others as
given. A tool call's ``arguments``, a tool response's ``response`` and a tool execution's
``arguments`` / ``result`` given as a JSON string that parses as an object or array are that
parsed value (so a call, its execution and the response the model is given compare equal
whichever dialect spelled them); any other value is kept as given. Nothing is normalised
beyond that: a finish reason is the emitter's (``tool_calls`` from the official
instrumentation and OpenInference, ``tool_call`` from OpenLLMetry), and so are the parts
(OpenLLMetry writes an empty text part before a streamed tool call).

Content that does not parse (``gen_ai.input.messages`` that is not a JSON array) is kept as
``[value]``, so that the audit's schema check names it rather than the record losing it.
The span's attributes, events, links and its resource's attributes are always kept
verbatim.

Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core.errors import ReplayError
from core.formats import jsonstrict

GEN_AI = "gen_ai"
OPENINFERENCE = "openinference"
OPENLLMETRY = "openllmetry"

#: a JSON value a string attribute parses to is used only this deep (deeper is kept as the
#: string: the sealed record nests it under its own levels)
MAX_JSON_DEPTH = 64
_MAX_SAFE = 2**53
#: what OpenInference writes in place of content it was told to hide
REDACTED = "__REDACTED__"

AnyValue = dict[str, Any]
_NOT_JSON: Any = object()


# ---------------------------------------------------------------------------------------
# Values: OTLP AnyValues and JSON strings into plain JSON (canonicalisable: no NaN, no
# integer beyond 2**53)


def json_value(value: AnyValue) -> Any:
    """The plain JSON value of an OTLP AnyValue (plain span dict spelling): a kvlist is an
    object (a repeated key: the last), an array a list, bytes their base64; an integer
    beyond 2**53 and a non-finite double stay strings."""
    if not value:
        return None
    ((kind, inner),) = value.items()
    if kind in ("stringValue", "boolValue"):
        return inner
    if kind == "intValue":
        number = int(inner)
        return number if -_MAX_SAFE <= number <= _MAX_SAFE else inner
    if kind in ("doubleValue", "bytesValue"):
        return inner  # a float, or "NaN"/"Infinity"/"-Infinity"; base64 text
    if kind == "arrayValue":
        return [json_value(item) for item in inner["values"]]
    return {pair["key"]: json_value(pair["value"]) for pair in inner["values"]}


def _loads(text: str) -> Any:
    """The JSON value `text` spells, strictly (no duplicate keys, NaN or Infinity), when it
    is one a canonical record can hold (no integer beyond 2**53, at most MAX_JSON_DEPTH
    deep); else ``_NOT_JSON``."""
    try:
        value = jsonstrict.loads_strict(text.encode("utf-8"), where="attribute")
    except (ReplayError, UnicodeEncodeError):
        return _NOT_JSON
    if jsonstrict.deeper_than(value, MAX_JSON_DEPTH) or _has_unsafe_int(value):
        return _NOT_JSON
    return value


def _has_unsafe_int(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is int and not -_MAX_SAFE <= node <= _MAX_SAFE:
            return True
        if type(node) is dict:
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
    return False


def parsed(value: Any) -> Any:
    """A tool call's arguments, a tool's result, a tool response: a JSON string that parses
    as an object or an array is that value; anything else as given."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        loaded = _loads(value)
        if isinstance(loaded, dict | list):
            return loaded
    return value


def _structured(value: Any) -> Any:
    """A content attribute's value: a JSON string parsed (kept as the string when it does
    not parse), a structured value as it is."""
    if isinstance(value, str):
        loaded = _loads(value)
        return value if loaded is _NOT_JSON else loaded
    return value


class _Attributes:
    """A span's (or event's) attributes by key (a repeated key: the last), read as plain
    values."""

    def __init__(self, pairs: Iterable[dict[str, Any]]) -> None:
        self.raw: dict[str, AnyValue] = {pair["key"]: pair["value"] for pair in pairs}

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def value(self, key: str) -> Any:
        raw = self.raw.get(key)
        return None if raw is None else json_value(raw)

    def text(self, *keys: str) -> str | None:
        """The first of `keys` that holds a string."""
        for key in keys:
            raw = self.raw.get(key)
            if raw is not None and "stringValue" in raw:
                return str(raw["stringValue"])
        return None

    def integer(self, *keys: str) -> int | None:
        """The first of `keys` that holds a whole number (an int, an integral double, or a
        decimal string), within 2**53."""
        for key in keys:
            value = self.value(key)
            if (type(value) is float and value.is_integer()) or (
                type(value) is str and re.fullmatch(r"-?[0-9]{1,16}", value)
            ):
                value = int(value)
            if type(value) is int and -_MAX_SAFE <= value <= _MAX_SAFE:
                return value
        return None

    def indexed(self, prefix: str) -> dict[int, dict[str, Any]]:
        """The attributes ``<prefix>.<N>.<rest>`` as {N: {rest: plain value}}, N ascending."""
        found: dict[int, dict[str, Any]] = {}
        start = len(prefix) + 1
        for key, raw in self.raw.items():
            if not key.startswith(prefix + "."):
                continue
            index, dot, rest = key[start:].partition(".")
            if dot and index.isascii() and index.isdigit() and len(index) < 10:
                found.setdefault(int(index), {})[rest] = json_value(raw)
        return dict(sorted(found.items()))


# ---------------------------------------------------------------------------------------
# Messages in the conventions' shape


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": parsed(arguments)}


def _tool_response(call_id: Any, response: Any) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": call_id, "response": parsed(response)}


def _normal_part(part: Any) -> Any:
    """A part as the conventions' own spelling gives it, with the tool call and response
    values parsed (and their ``id`` null when absent)."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "tool_call":
        out = dict(part)
        out.setdefault("id", None)
        out["arguments"] = parsed(out.get("arguments"))  # absent: null, the schema's default
        return out
    if kind == "tool_call_response":
        out = dict(part)
        out.setdefault("id", None)
        if "response" in out:
            out["response"] = parsed(out["response"])
        return out
    return part


def _normal_messages(value: Any) -> list[Any]:
    """``gen_ai.input.messages`` / ``output.messages`` (parsed): each message's parts
    normalised; a value that is not a list kept as ``[value]``."""
    if not isinstance(value, list):
        return [value]
    out: list[Any] = []
    for message in value:
        if isinstance(message, dict) and isinstance(message.get("parts"), list):
            out.append({**message, "parts": [_normal_part(p) for p in message["parts"]]})
        else:
            out.append(message)
    return out


def _normal_parts(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return [value]
    return [_normal_part(part) for part in value]


def _content_parts(content: Any) -> list[Any]:
    """Message content in the chat-completions spelling (a string, or a list of content
    blocks) as parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        return [_block_part(block) for block in content]
    return [{"type": "text", "content": content}]


def _block_part(block: Any) -> Any:
    if not isinstance(block, dict):
        return {"type": "text", "content": block} if isinstance(block, str) else block
    kind = block.get("type")
    if kind == "text" and "text" in block:
        return {"type": "text", "content": block["text"]}
    if kind == "image_url":
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        return _image_part(url)
    return block


def _image_part(url: Any) -> dict[str, Any]:
    if isinstance(url, str) and url.startswith("data:") and "," in url:
        header, data = url.split(",", 1)
        mime = header[5:].split(";", 1)[0] or None
        return {"type": "blob", "modality": "image", "mime_type": mime, "content": data}
    return {"type": "uri", "modality": "image", "uri": url}


def _chat_message(
    role: Any,
    content: Any,
    *,
    tool_calls: Iterable[dict[str, Any]] = (),
    tool_call_id: Any = None,
    name: Any = None,
    parts: list[Any] | None = None,
) -> dict[str, Any]:
    """A message given in the chat-completions way (a role, content, tool calls; a tool
    message's call id) in the conventions' shape: a tool message is one
    ``tool_call_response``; any other its content's parts, then its tool calls."""
    if role == "tool":
        text = content
        if text is None and parts:
            texts = [p.get("content") for p in parts if isinstance(p, dict)]
            text = "".join(t for t in texts if isinstance(t, str))
        message: dict[str, Any] = {"role": role, "parts": [_tool_response(tool_call_id, text)]}
    else:
        body = list(parts) if parts is not None else _content_parts(content)
        body.extend(
            _tool_call(call.get("id"), call.get("name"), call.get("arguments"))
            for call in tool_calls
        )
        message = {"role": role, "parts": body}
    if name is not None:
        message["name"] = name
    return message


def _openai_tool_calls(value: Any) -> list[dict[str, Any]]:
    """Chat-completions tool calls (``[{"id", "type", "function": {"name", "arguments"}}]``,
    possibly as a JSON string) as ``{"id", "name", "arguments"}``."""
    value = _structured(value)
    calls = []
    for call in value if isinstance(value, list) else ():
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name", call.get("name")),
                "arguments": function.get("arguments", call.get("arguments")),
            }
        )
    return calls


def _openai_message(message: Any, *, default_role: str | None = None) -> Any:
    """One chat-completions message dict in the conventions' shape."""
    if not isinstance(message, dict):
        return message
    return _chat_message(
        message.get("role") or default_role,
        _structured_content(message.get("content")),
        tool_calls=_openai_tool_calls(message.get("tool_calls")),
        tool_call_id=message.get("tool_call_id"),
        name=message.get("name"),
    )


def _structured_content(content: Any) -> Any:
    """Content as a JSON string of content blocks (what OpenLLMetry wrote for a list) read
    back as the list; any other content as it is."""
    if isinstance(content, str) and content.startswith("[{"):
        loaded = _loads(content)
        if isinstance(loaded, list) and all(
            isinstance(block, dict) and "type" in block for block in loaded
        ):
            return loaded
    return content


# ---------------------------------------------------------------------------------------
# The dialects' messages


_OI_TOOL_CALL = re.compile(r"message\.tool_calls\.([0-9]{1,9})\.tool_call\.(.+)", re.DOTALL)
_OI_CONTENT = re.compile(r"message\.contents\.([0-9]{1,9})\.(.+)", re.DOTALL)
_OL_TOOL_CALL = re.compile(r"tool_calls\.([0-9]{1,9})\.(.+)", re.DOTALL)


def _grouped(fields: dict[str, Any], pattern: re.Pattern[str]) -> list[dict[str, Any]]:
    """The fields `pattern` matches (index, rest) grouped by index, ascending."""
    groups: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        m = pattern.fullmatch(key)
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [groups[i] for i in sorted(groups)]


def _oi_content_part(item: dict[str, Any]) -> Any:
    kind = item.get("message_content.type")
    if kind == "tool_use" or "tool_call.function.name" in item:
        return _tool_call(
            item.get("tool_call.id"),
            item.get("tool_call.function.name"),
            item.get("tool_call.function.arguments"),
        )
    if kind == "image":
        return _image_part(item.get("message_content.image.image.url"))
    if kind == "reasoning":
        return {"type": "reasoning", "content": item.get("message_content.text")}
    if kind in (None, "text"):
        return {"type": "text", "content": item.get("message_content.text")}
    part: dict[str, Any] = {"type": kind}
    part.update(
        (key.removeprefix("message_content."), value)
        for key, value in item.items()
        if key != "message_content.type"
    )
    return part


def _oi_messages(
    attrs: _Attributes, prefix: str, *, finish_reason: str | None = None
) -> list[Any] | None:
    """OpenInference's flattened ``llm.input_messages`` / ``llm.output_messages``."""
    indexed = attrs.indexed(prefix)
    if not indexed:
        return None
    messages = []
    for n, fields in indexed.items():
        calls = [
            {
                "id": call.get("id"),
                "name": call.get("function.name"),
                "arguments": call.get("function.arguments"),
            }
            for call in _grouped(fields, _OI_TOOL_CALL)
        ]
        if "message.function_call_name" in fields:
            calls.append(
                {
                    "id": None,
                    "name": fields["message.function_call_name"],
                    "arguments": fields.get("message.function_call_arguments_json"),
                }
            )
        contents = _grouped(fields, _OI_CONTENT)
        parts = [_oi_content_part(item) for item in contents] if contents else None
        if parts:
            # a tool call in the ordered contents ("tool_use") is also in message.tool_calls
            # (OpenInference's tool_calling.md): once, where the contents put it
            ordered = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"]
            calls = [
                c for c in calls if _tool_call(c["id"], c["name"], c["arguments"]) not in ordered
            ]
        message = _chat_message(
            fields.get("message.role"),
            fields.get("message.content"),
            tool_calls=calls,
            tool_call_id=fields.get("message.tool_call_id"),
            name=fields.get("message.name"),
            parts=parts,
        )
        if finish_reason is not None and n == 0:
            message["finish_reason"] = finish_reason
        messages.append(message)
    return messages


def _oi_completions(attrs: _Attributes, prefix: str, role: str, key: str) -> list[Any] | None:
    """OpenInference's legacy completions ``llm.prompts.N.prompt.text`` /
    ``llm.choices.N.completion.text``."""
    indexed = attrs.indexed(prefix)
    texts = [fields[key] for fields in indexed.values() if key in fields]
    return [_chat_message(role, text) for text in texts] or None


def _ol_messages(attrs: _Attributes, prefix: str, *, output: bool) -> list[Any] | None:
    """OpenLLMetry's flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (before it
    wrote the conventions' attributes)."""
    indexed = attrs.indexed(prefix)
    if not indexed:
        return None
    messages = []
    for fields in indexed.values():
        calls = _grouped(fields, _OL_TOOL_CALL)
        content = _structured_content(fields.get("content"))
        message = _chat_message(
            fields.get("role") or ("assistant" if output else None),
            content,
            tool_calls=calls,
            tool_call_id=fields.get("tool_call_id"),
            name=fields.get("name"),
        )
        if "refusal" in fields:
            message["parts"].insert(0, {"type": "refusal", "content": fields["refusal"]})
        if output and "finish_reason" in fields:
            message["finish_reason"] = fields["finish_reason"]
        messages.append(message)
    return messages


#: the deprecated per-message span events: name -> (the role by default, an output)
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE_EVENT = "gen_ai.choice"
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"


def _event_body(event: dict[str, Any]) -> dict[str, Any]:
    """A deprecated event's body: ``gen_ai.event.content`` (the body as JSON), else its
    attributes but the common ``gen_ai.*`` ones, as plain values."""
    attrs = _Attributes(event["attributes"])
    whole = attrs.value("gen_ai.event.content")
    if whole is not None:
        body = _structured(whole)
        if isinstance(body, dict):
            return body
    return {key: json_value(raw) for key, raw in attrs.raw.items() if not key.startswith("gen_ai.")}


def _event_messages(events: list[dict[str, Any]]) -> tuple[list[Any] | None, list[Any] | None]:
    """Input and output messages from the deprecated per-message events, in event order
    (choices by their index); None for a side no event carries content for."""
    inputs: list[Any] = []
    outputs: list[tuple[int, int, Any]] = []
    content_in = content_out = False
    for event in events:
        name = event["name"]
        if name in _MESSAGE_EVENTS:
            body = _event_body(event)
            calls = _openai_tool_calls(body.get("tool_calls"))
            content_in |= body.get("content") is not None or bool(calls)
            inputs.append(
                _chat_message(
                    body.get("role") or _MESSAGE_EVENTS[name],
                    _structured_content(body.get("content")),
                    tool_calls=calls,
                    tool_call_id=body.get("id"),
                )
            )
        elif name == _CHOICE_EVENT:
            body = _event_body(event)
            message = _structured(body.get("message"))
            message = message if isinstance(message, dict) else {}
            calls = _openai_tool_calls(message.get("tool_calls"))
            content_out |= message.get("content") is not None or bool(calls)
            out = _chat_message(
                message.get("role") or "assistant",
                _structured_content(message.get("content")),
                tool_calls=calls,
            )
            if body.get("finish_reason") is not None:
                out["finish_reason"] = body["finish_reason"]
            index = body.get("index")
            order = index if type(index) is int else len(outputs)
            outputs.append((order, len(outputs), out))
    return (
        inputs if content_in else None,
        [out for _, _, out in sorted(outputs, key=lambda item: item[:2])] if content_out else None,
    )


def _legacy_event_messages(
    events: list[dict[str, Any]],
) -> tuple[list[Any] | None, list[Any] | None]:
    """The oldest content events: ``gen_ai.content.prompt`` (``gen_ai.prompt``: the
    chat-completions messages as JSON) and ``gen_ai.content.completion``
    (``gen_ai.completion``)."""
    inputs = outputs = None
    for event in events:
        attrs = _Attributes(event["attributes"])
        if event["name"] == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            value = _structured(attrs.value("gen_ai.prompt"))
            inputs = [_openai_message(m) for m in value] if isinstance(value, list) else [value]
        elif event["name"] == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            value = _structured(attrs.value("gen_ai.completion"))
            if isinstance(value, list):
                outputs = [_completion_message(m) for m in value]
            else:
                outputs = [value]
    return inputs, outputs


def _completion_message(value: Any) -> Any:
    """A chat-completions choice (or bare message) in the conventions' output shape."""
    if not isinstance(value, dict):
        return value
    message = value.get("message") if isinstance(value.get("message"), dict) else value
    out = _openai_message(message, default_role="assistant")
    if value.get("finish_reason") is not None:
        out["finish_reason"] = value["finish_reason"]
    return out


# ---------------------------------------------------------------------------------------
# The span record


_OL_KEYS = frozenset(
    {
        "llm.request.type",
        "llm.usage.total_tokens",
        "llm.is_streaming",
        "gen_ai.is_streaming",
        "gen_ai.usage.total_tokens",
        "gen_ai.openai.api_base",
        "gen_ai.openai.api_type",
        "gen_ai.openai.api_version",
    }
)
_OL_INDEXED = re.compile(r"(?:gen_ai\.(?:prompt|completion)|llm\.request\.functions)\.[0-9]")
_GEN_AI_EVENTS = frozenset(
    {
        *_MESSAGE_EVENTS,
        _CHOICE_EVENT,
        _DETAILS_EVENT,
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
    }
)


def dialect_of(span: dict[str, Any], attrs: _Attributes | None = None) -> str | None:
    """Which dialect wrote `span`: OpenInference's span kind, OpenLLMetry's own attributes,
    else any ``gen_ai.*`` attribute or event; None for a span that is not a GenAI one."""
    attrs = attrs or _Attributes(span["attributes"])
    keys = attrs.raw.keys()
    if "openinference.span.kind" in keys:
        return OPENINFERENCE
    if any(
        key in _OL_KEYS or key.startswith("traceloop.") or _OL_INDEXED.match(key) for key in keys
    ):
        return OPENLLMETRY
    if any(key.startswith("gen_ai.") for key in keys) or any(
        event["name"] in _GEN_AI_EVENTS for event in span["events"]
    ):
        return GEN_AI
    return None


_OI_OPERATIONS = {
    "LLM": "chat",
    "EMBEDDING": "embeddings",
    "TOOL": "execute_tool",
    "AGENT": "invoke_agent",
    "RETRIEVER": "retrieval",
}
_OL_REQUEST_TYPES = {
    "chat": "chat",
    "completion": "text_completion",
    "embedding": "embeddings",
}
_OL_SPAN_KINDS = {"tool": "execute_tool", "agent": "invoke_agent", "workflow": "invoke_workflow"}
#: OpenLLMetry's own names of request parameters -> the conventions'
_OL_PARAMETERS = {
    "llm.frequency_penalty": "frequency_penalty",
    "llm.presence_penalty": "presence_penalty",
    "llm.top_k": "top_k",
    "llm.chat.stop_sequences": "stop_sequences",
}
_REQUEST_PREFIX = "gen_ai.request."


def _operation(attrs: _Attributes, dialect: str | None) -> str | None:
    named = attrs.text("gen_ai.operation.name")
    if named is not None:
        return named
    if dialect == OPENINFERENCE:
        kind = attrs.text("openinference.span.kind")
        if kind == "LLM" and attrs.indexed("llm.prompts"):
            return "text_completion"
        return _OI_OPERATIONS.get((kind or "").upper())
    request_type = attrs.text("llm.request.type")
    if request_type is not None:
        return _OL_REQUEST_TYPES.get(request_type, request_type)
    return _OL_SPAN_KINDS.get(attrs.text("traceloop.span.kind") or "")


def _invocation_parameters(attrs: _Attributes) -> dict[str, Any]:
    value = attrs.value("llm.invocation_parameters")
    loaded = _structured(value) if value is not None else None
    return loaded if isinstance(loaded, dict) else {}


def _request_parameters(attrs: _Attributes, invocation: dict[str, Any]) -> dict[str, Any]:
    params = {
        key: value
        for key, value in invocation.items()
        if key not in ("model", "messages", "tools", "functions")
    }
    for key, name in _OL_PARAMETERS.items():
        if key in attrs:
            params[name] = attrs.value(key)
    for key in attrs.raw:
        if key.startswith(_REQUEST_PREFIX) and key != "gen_ai.request.model":
            params[key[len(_REQUEST_PREFIX) :]] = attrs.value(key)
    return params


def _content(attrs: _Attributes, events: list[dict[str, Any]], key: str) -> tuple[bool, Any]:
    """A conventions content attribute, on the span or on a
    ``gen_ai.client.inference.operation.details`` event: (found, parsed value)."""
    if key in attrs:
        return True, _structured(attrs.value(key))
    for event in events:
        if event["name"] == _DETAILS_EVENT:
            event_attrs = _Attributes(event["attributes"])
            if key in event_attrs:
                return True, _structured(event_attrs.value(key))
    return False, None


def _messages(
    attrs: _Attributes, events: list[dict[str, Any]], finish_reason: str | None
) -> tuple[list[Any] | None, list[Any] | None]:
    """The input and output messages, from whichever source the span has (the conventions'
    attributes first; then OpenLLMetry's and OpenInference's flattened ones; then the
    deprecated events)."""
    found_in, value_in = _content(attrs, events, "gen_ai.input.messages")
    found_out, value_out = _content(attrs, events, "gen_ai.output.messages")
    inputs = _normal_messages(value_in) if found_in else None
    outputs = _normal_messages(value_out) if found_out else None
    if inputs is None:
        inputs = (
            _ol_messages(attrs, "gen_ai.prompt", output=False)
            or _oi_messages(attrs, "llm.input_messages")
            or _oi_completions(attrs, "llm.prompts", "user", "prompt.text")
        )
    if outputs is None:
        outputs = (
            _ol_messages(attrs, "gen_ai.completion", output=True)
            or _oi_messages(attrs, "llm.output_messages", finish_reason=finish_reason)
            or _oi_completions(attrs, "llm.choices", "assistant", "completion.text")
        )
    if inputs is None or outputs is None:
        event_in, event_out = _event_messages(events)
        legacy_in, legacy_out = _legacy_event_messages(events)
        inputs = inputs if inputs is not None else event_in or legacy_in
        outputs = outputs if outputs is not None else event_out or legacy_out
    return inputs, outputs


def _definition(value: Any) -> Any:
    """A tool definition in the conventions' shape: the chat-completions spelling
    (``{"type": "function", "function": {...}}``) flattened."""
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        function = value["function"]
        out = {"type": value.get("type", "function")}
        out.update(function)
        return out
    return value


def _tool_definitions(attrs: _Attributes, events: list[dict[str, Any]]) -> list[Any] | None:
    found, value = _content(attrs, events, "gen_ai.tool.definitions")
    if found:
        definitions = value if isinstance(value, list) else None
    else:
        oi = attrs.indexed("llm.tools")
        definitions = [
            _definition(_structured(fields["tool.json_schema"]))
            for fields in oi.values()
            if "tool.json_schema" in fields
        ] or None
        if definitions is None:
            functions = attrs.indexed("llm.request.functions")
            definitions = [
                {
                    "type": "function",
                    **{k: parsed(v) if k == "parameters" else v for k, v in fields.items()},
                }
                for fields in functions.values()
            ] or None
        if definitions is None and "tool.parameters" in attrs:
            definitions = [
                {
                    "type": "function",
                    "name": attrs.text("tool.name"),
                    "description": attrs.text("tool.description"),
                    "parameters": parsed(attrs.value("tool.parameters")),
                }
            ]
    if definitions is None:
        return None
    definitions = [_definition(d) for d in definitions]
    # the record holds objects only (a definition that is not one stays in the attributes)
    return definitions if all(isinstance(d, dict) for d in definitions) else None


def _unredacted(value: Any) -> Any:
    return None if value == REDACTED else value


def _tool(attrs: _Attributes) -> dict[str, Any]:
    """An ``execute_tool`` span's tool: the conventions' attributes, else OpenInference's
    TOOL span's (``input.value`` / ``output.value``; ``__REDACTED__`` is no value), else
    Traceloop's tool entity's (``traceloop.entity.input`` / ``output``: the Python call's
    ``{"args", "kwargs"}`` and its return value, each as JSON: read back whole, a call by
    keywords alone as its keywords, as a model's tool call spells them)."""

    def first(*keys: str) -> Any:
        for key in keys:
            if key in attrs:
                return _unredacted(attrs.value(key))
        return None

    name = attrs.text("gen_ai.tool.name", "tool.name")
    arguments = parsed(first("gen_ai.tool.call.arguments", "input.value"))
    result = parsed(first("gen_ai.tool.call.result", "output.value"))
    if attrs.text("traceloop.span.kind") == "tool":
        name = name or attrs.text("traceloop.entity.name")
        if arguments is None:
            arguments = _traceloop_value(attrs.value("traceloop.entity.input"))
            if (
                isinstance(arguments, dict)
                and arguments.keys() == {"args", "kwargs"}
                and arguments["args"] == []
                and isinstance(arguments["kwargs"], dict)
            ):
                arguments = arguments["kwargs"]
        if result is None:
            result = _traceloop_value(attrs.value("traceloop.entity.output"))
    return {
        "name": name,
        "call_id": attrs.text("gen_ai.tool.call.id", "tool.id", "tool_call.id"),
        "arguments": arguments,
        "result": result,
    }


def _traceloop_value(value: Any) -> Any:
    """A Traceloop entity's input or output (always ``json.dumps`` of the Python value):
    the value, or the text as given when it does not parse (it truncates long ones)."""
    if isinstance(value, str):
        loaded = _loads(value)
        return value if loaded is _NOT_JSON else loaded
    return value


def _usage(attrs: _Attributes) -> dict[str, int | None] | None:
    usage = {
        "input_tokens": attrs.integer(
            "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"
        ),
        "output_tokens": attrs.integer(
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        ),
        "total_tokens": attrs.integer(
            "gen_ai.usage.total_tokens", "llm.usage.total_tokens", "llm.token_count.total"
        ),
    }
    return usage if any(v is not None for v in usage.values()) else None


def _finish_reasons(attrs: _Attributes, outputs: list[Any] | None) -> list[str] | None:
    value = attrs.value("gen_ai.response.finish_reasons")
    if isinstance(value, list) and all(isinstance(r, str) for r in value):
        return value
    if isinstance(value, str):
        return [value]
    single = attrs.text("llm.finish_reason")
    if single is not None:
        return [single]
    completions = attrs.indexed("gen_ai.completion")
    reasons = [f["finish_reason"] for f in completions.values() if "finish_reason" in f]
    if reasons and all(isinstance(r, str) for r in reasons):
        return reasons
    if outputs:
        reasons = [m.get("finish_reason") for m in outputs if isinstance(m, dict)]
        if reasons and all(isinstance(r, str) for r in reasons):
            return reasons
    return None


def _oi_response_id(attrs: _Attributes) -> str | None:
    """The response id OpenInference's LLM span carries only in its ``output.value`` (the
    provider's response, as JSON)."""
    if attrs.text("openinference.span.kind") != "LLM":
        return None
    output = attrs.text("output.value")
    if output is None or not output.startswith("{"):
        return None
    loaded = _loads(output)
    if isinstance(loaded, dict) and isinstance(loaded.get("id"), str):
        return str(loaded["id"])
    return None


def _agent_name(attrs: _Attributes) -> str | None:
    name = attrs.text("gen_ai.agent.name", "agent.name")
    if name is None and attrs.text("traceloop.span.kind") == "agent":
        name = attrs.text("traceloop.entity.name")
    return name


def span_record(span: dict[str, Any]) -> dict[str, Any]:
    """The normalised span record of one plain span dict (see the module's docstring and
    the shared design): its identity and timing, what it says about a GenAI operation
    (null where it says nothing), and all it carried, verbatim."""
    attrs = _Attributes(span["attributes"])
    events = span["events"]
    dialect = dialect_of(span, attrs)
    operation = _operation(attrs, dialect)
    invocation = _invocation_parameters(attrs)
    oi_finish = attrs.text("llm.finish_reason") if dialect == OPENINFERENCE else None
    inputs, outputs = _messages(attrs, events, oi_finish)
    found, instructions = _content(attrs, events, "gen_ai.system_instructions")
    request_model = attrs.text("gen_ai.request.model", "llm.request.model_name")
    if request_model is None and isinstance(invocation.get("model"), str):
        request_model = invocation["model"]
    resource = _Attributes(span["resource"]["attributes"])
    return {
        "span_id": span["span_id"],
        "parent_span_id": span["parent_span_id"] or None,
        "name": span["name"],
        "kind": span["kind"].removeprefix("SPAN_KIND_").lower(),
        "start_time_unix_nano": span["start_time_unix_nano"],
        "end_time_unix_nano": span["end_time_unix_nano"],
        "status": {
            "code": span["status"]["code"].removeprefix("STATUS_CODE_").lower(),
            "message": span["status"]["message"],
        },
        "service": resource.text("service.name"),
        "scope": {
            "name": span["scope"]["name"],
            "version": span["scope"]["version"],
            "attributes": span["scope"]["attributes"],
        },
        "schema_url": span["schema_url"],
        "trace_state": span["trace_state"],
        "flags": span["flags"],
        "dialect": dialect,
        "operation": operation,
        "provider": attrs.text(
            "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"
        ),
        "request_model": request_model,
        "response_model": attrs.text(
            "gen_ai.response.model", "llm.response.model_name", "llm.model_name"
        ),
        "response_id": attrs.text("gen_ai.response.id") or _oi_response_id(attrs),
        "request_parameters": _request_parameters(attrs, invocation) if dialect else {},
        "conversation_id": attrs.text("gen_ai.conversation.id", "session.id"),
        "agent_name": _agent_name(attrs),
        "input_messages": inputs,
        "output_messages": outputs,
        "system_instructions": _normal_parts(instructions) if found else None,
        "tool_definitions": _tool_definitions(attrs, events),
        "tool": _tool(attrs) if operation == "execute_tool" else None,
        "usage": _usage(attrs),
        "finish_reasons": _finish_reasons(attrs, outputs),
        "attributes": span["attributes"],
        "events": events,
        "links": span["links"],
        "dropped": {
            "attributes": span["dropped_attributes_count"],
            "events": span["dropped_events_count"],
            "links": span["dropped_links_count"],
        },
        "resource_attributes": span["resource"]["attributes"],
    }
