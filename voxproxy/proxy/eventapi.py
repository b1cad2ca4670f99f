"""The event API: tool, state and outcome events posted by the agent or its backend.

``POST /v1/calls/{call}/events`` with a JSON object (one event) or a JSON array
(several, applied in order, all or none), ``Authorization: Bearer <token>``.
``{call}`` is the id the proxy handed upstream (``X-Voxproxy-Call``), a wire
call id (Twilio ``streamSid`` / ``callSid``) or the receipt's ``c_...`` id.

The events are those of MEASUREMENT.md section 5, by ``type``::

    state.updated     field, version, value_hash | value
    tool.started      operation_id, tool, attempt (1), state_version?, args_hash | args?,
                      idempotency_key?
    tool.finished     operation_id, status (ok|error|timeout|malformed), result_hash | result?
    tool.cancelled    operation_id
    backend.verified  operation_id?, field, value_hash | value
    confirmation      field, value_hash | value
    outcome.verified  verified (bool)

Values arrive as keyed hashes (``*_hash``) or raw (``args``, ``result``,
``value``: any JSON), which are hashed here with the proxy's keyed hash before
anything is stored; idempotency keys are always hashed. The raw value goes no
further than this module.

Nothing a poster names reaches a receipt verbatim unless it is known to be a
name and not content (a phone number in a ``tool``, an SSN in a ``field``):

- ``operation_id`` is always replaced by its keyed hash (``op_`` + 16 hex
  digits): matching ``tool.started`` to ``tool.finished`` needs equality, not the
  id. (An operation the wire started, e.g. an OpenAI ``call_id``, keeps its own
  id; finish it on the wire too.)
- ``tool`` and ``field`` are kept when they are in the declared vocabulary
  (``EventApi(names=...)``, ``--event-names``); without one, when they have the
  shape of a name: letters and ``_ . : / -``, no digits, at most
  :data:`~voxproxy.core.ids.MAX_PLAIN_NAME_CHARS` characters. Anything else becomes
  ``n_`` + its keyed hash (:func:`voxproxy.core.ids.safe_name`, the rule the OpenAI
  Realtime decoder applies to the wire's tool names too).
- a posted ``*_hash`` is kept when it looks like a hash (hex digits, 8 to 128, with
  an optional short prefix); anything else is hashed again.

Per call, the session keeps at most ``MAX_TOOL_EVENTS`` events; the rest are
counted in the receipt's anomalies (``events_over_limit``). Each event is stamped with the
proxy's monotonic clock on arrival and handed to the call's session, so it
lands in the receipt (``events``, ``tools``, ``effects``, placed in the turn it
falls in) and becomes a tool span.

Answers: ``202 {"accepted": n}``; ``401`` without a valid token; ``400`` for a
body that is not JSON; ``422`` naming each bad field and why; ``404`` when no
live call has that id (unknown or finished); ``413`` for a body over the limit.
No access log is written (paths carry call ids).
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, Self

import orjson
from aiohttp import web
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from voxproxy.core.events import TOOL_EVENT_KINDS, ToolEvent
from voxproxy.core.ids import keyed_hash, safe_name, value_digest
from voxproxy.httpserve import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    BodyTimeout,
    HttpListener,
    body_timeout_response,
    read_body,
)
from voxproxy.proxy.livecalls import LiveCalls

log = logging.getLogger("voxproxy.eventapi")

MAX_BODY_BYTES = 256 * 1024
MAX_EVENTS_PER_REQUEST = 256
MIN_TOKEN_CHARS = 16
OPERATION_PREFIX = "op_"
_HASH_SHAPE = re.compile(r"(?:[A-Za-z]{1,8}[_:])?[0-9A-Fa-f]{8,128}")

Name = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
]
"""A tool or field name: kept verbatim, so restricted to identifier-like text."""
OperationId = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@/+=-]+$")
]
Hash = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:+/=-]+$")
]
"""A value hash computed by the poster (kept verbatim: it must not be the value itself)."""
Key = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    RAW_OR_HASH: ClassVar[tuple[str, str, bool] | None] = None
    """(raw field, its hash field, whether one of them is required): at most one given."""

    @model_validator(mode="after")
    def _raw_or_hash(self) -> Self:
        if self.RAW_OR_HASH is not None:
            raw, hashed, required = self.RAW_OR_HASH
            given = [f for f in (raw, hashed) if f in self.model_fields_set]
            if len(given) == 2:
                raise ValueError(f"give either {raw} or {hashed}, not both")
            if required and not given:
                raise ValueError(f"{hashed} (or the raw {raw}, hashed by the proxy) is required")
        return self


class StateUpdatedIn(_In):
    type: Literal["state.updated"]
    field: Name
    version: Annotated[int, Field(ge=0)]
    value_hash: Hash | None = None
    value: JsonValue = None

    RAW_OR_HASH = ("value", "value_hash", True)


class ToolStartedIn(_In):
    type: Literal["tool.started"]
    operation_id: OperationId
    tool: Name
    attempt: Annotated[int, Field(ge=1)] = 1
    state_version: Annotated[int, Field(ge=0)] | None = None
    args_hash: Hash | None = None
    args: JsonValue = None
    idempotency_key: Key | None = None

    RAW_OR_HASH = ("args", "args_hash", False)


class ToolFinishedIn(_In):
    type: Literal["tool.finished"]
    operation_id: OperationId
    status: Literal["ok", "error", "timeout", "malformed"]
    result_hash: Hash | None = None
    result: JsonValue = None

    RAW_OR_HASH = ("result", "result_hash", False)


class ToolCancelledIn(_In):
    type: Literal["tool.cancelled"]
    operation_id: OperationId


class BackendVerifiedIn(_In):
    type: Literal["backend.verified"]
    operation_id: OperationId | None = None
    field: Name
    value_hash: Hash | None = None
    value: JsonValue = None

    RAW_OR_HASH = ("value", "value_hash", True)


class ConfirmationIn(_In):
    type: Literal["confirmation"]
    field: Name
    value_hash: Hash | None = None
    value: JsonValue = None

    RAW_OR_HASH = ("value", "value_hash", True)


class OutcomeVerifiedIn(_In):
    type: Literal["outcome.verified"]
    verified: bool


EventIn = Annotated[
    StateUpdatedIn
    | ToolStartedIn
    | ToolFinishedIn
    | ToolCancelledIn
    | BackendVerifiedIn
    | ConfirmationIn
    | OutcomeVerifiedIn,
    Field(discriminator="type"),
]
_ONE: TypeAdapter[Any] = TypeAdapter(EventIn)
_MANY: TypeAdapter[Any] = TypeAdapter(list[EventIn])
API_EVENT_TYPES = (
    StateUpdatedIn,
    ToolStartedIn,
    ToolFinishedIn,
    ToolCancelledIn,
    BackendVerifiedIn,
    ConfirmationIn,
    OutcomeVerifiedIn,
)


def operation_digest(secret: bytes, operation_id: str) -> str:
    """What a posted ``operation_id`` becomes in the receipt."""
    return keyed_hash(secret, f"operation\x00{operation_id}", OPERATION_PREFIX)


class _Scrub:
    """Turns the names and ids of one request's events into receipt-safe ones."""

    __slots__ = ("names", "secret")

    def __init__(self, secret: bytes, names: frozenset[str] | None) -> None:
        self.secret = secret
        self.names = names

    def op(self, operation_id: str | None) -> str | None:
        return None if operation_id is None else operation_digest(self.secret, operation_id)

    def name(self, name: str) -> str:
        return safe_name(self.secret, name, self.names)

    def hashed(self, e: _In, raw: str, hashed: str, domain: str) -> str | None:
        if raw in e.model_fields_set:
            return value_digest(self.secret, domain, getattr(e, raw))
        value = getattr(e, hashed)
        if not isinstance(value, str):
            return None
        if _HASH_SHAPE.fullmatch(value) is not None:
            return value
        return value_digest(self.secret, "posted-hash", value)


def to_tool_event(
    e: _In, t_ns: int, secret: bytes, names: frozenset[str] | None = None
) -> ToolEvent:
    """The content-free core event for a validated API event: raw values hashed, ids
    hashed, names kept only when declared or name-shaped (see the module's docstring)."""
    scrub = _Scrub(secret, names)
    if isinstance(e, StateUpdatedIn):
        return ToolEvent(
            e.type,
            t_ns,
            field=scrub.name(e.field),
            version=e.version,
            value_hash=scrub.hashed(e, "value", "value_hash", "value"),
        )
    if isinstance(e, ToolStartedIn):
        key = e.idempotency_key
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=scrub.op(e.operation_id),
            tool=scrub.name(e.tool),
            attempt=e.attempt,
            state_version=e.state_version,
            args_hash=scrub.hashed(e, "args", "args_hash", "args"),
            idempotency_key=None if key is None else value_digest(secret, "idempotency", key),
        )
    if isinstance(e, ToolFinishedIn):
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=scrub.op(e.operation_id),
            status=e.status,
            result_hash=scrub.hashed(e, "result", "result_hash", "result"),
        )
    if isinstance(e, ToolCancelledIn):
        return ToolEvent(e.type, t_ns, operation_id=scrub.op(e.operation_id))
    if isinstance(e, BackendVerifiedIn):
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=scrub.op(e.operation_id),
            field=scrub.name(e.field),
            value_hash=scrub.hashed(e, "value", "value_hash", "value"),
        )
    if isinstance(e, ConfirmationIn):
        return ToolEvent(
            e.type,
            t_ns,
            field=scrub.name(e.field),
            value_hash=scrub.hashed(e, "value", "value_hash", "value"),
        )
    if isinstance(e, OutcomeVerifiedIn):
        return ToolEvent(e.type, t_ns, verified=e.verified)
    raise TypeError(f"not an API event: {type(e).__name__}")


def problems(exc: ValidationError, many: bool) -> list[dict[str, str]]:
    """Each validation error as ``{"field", "reason"}``, without echoing the input."""
    out: list[dict[str, str]] = []
    for err in exc.errors(include_input=False, include_url=False):
        parts: list[str] = []
        for part in err["loc"]:
            if isinstance(part, int):
                parts.append(f"[{part}]")
            elif part in TOOL_EVENT_KINDS:
                continue  # the discriminator's branch, not a field
            else:
                parts.append(("." if parts else "") + str(part))
        where = "".join(parts)
        if many:
            where = "events" + (where if where.startswith("[") else "." + where if where else "")
        msg = str(err["msg"]).removeprefix("Value error, ")
        out.append({"field": where or "(body)", "reason": msg})
    return out


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers=headers,
    )


class EventApi(HttpListener):
    """The HTTP server of the event API, on the proxy's event loop."""

    def __init__(
        self,
        calls: LiveCalls[Any],
        secret: bytes,
        token: str,
        clock: Callable[[], int] = time.monotonic_ns,
        *,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        body_timeout_s: float = BODY_TIMEOUT_S,
        names: frozenset[str] | None = None,
    ) -> None:
        """``names``: the tool and field names kept verbatim in receipts (any other is
        hashed); None keeps name-shaped ones (see the module's docstring)."""
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the event API token must be at least {MIN_TOKEN_CHARS} characters")
        self._calls = calls
        self._secret = secret
        self._token = token.encode("utf-8")
        self._clock = clock
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.names = names
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.accepted = 0
        self.rejected = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/calls/{call}/events", self._post)
        self._add_health(app)
        return app

    async def start(self, host: str, port: int) -> int:
        bound = await self._listen(self.app(), host, port)
        log.info("event API on http://%s:%d/v1/calls/{call}/events", host, bound)
        return bound

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            given = ""
        return hmac.compare_digest(given.strip().encode("utf-8"), self._token)

    def _reject(self, status: int, body: dict[str, Any], **headers: str) -> web.Response:
        self.rejected += 1
        return _json(status, body, headers or None)

    async def _post(self, request: web.Request) -> web.Response:
        t_ns = self._clock()  # stamped at arrival
        if not self._authorized(request):
            return self._reject(
                401,
                {"error": "unauthorized", "reason": "a valid bearer token is required"},
                **{"WWW-Authenticate": 'Bearer realm="voxproxy-events"'},
            )
        try:
            body = await read_body(request, self.body_timeout_s)
        except BodyTimeout:
            self.rejected += 1
            return body_timeout_response()
        except web.HTTPRequestEntityTooLarge:
            return self._reject(
                413, {"error": "too large", "reason": f"the body exceeds {MAX_BODY_BYTES} bytes"}
            )
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return self._reject(400, {"error": "bad request", "reason": "the body is not JSON"})
        many = isinstance(data, list)
        if many and not data:
            return self._reject(400, {"error": "bad request", "reason": "the array is empty"})
        if many and len(data) > MAX_EVENTS_PER_REQUEST:
            return self._reject(
                413,
                {
                    "error": "too large",
                    "reason": f"at most {MAX_EVENTS_PER_REQUEST} events per request",
                },
            )
        if not many and not isinstance(data, dict):
            return self._reject(
                400,
                {"error": "bad request", "reason": "the body must be a JSON object or array"},
            )
        try:
            items = _MANY.validate_python(data) if many else [_ONE.validate_python(data)]
        except ValidationError as exc:
            return self._reject(422, {"error": "invalid event", "problems": problems(exc, many)})
        call = self._calls.find(request.match_info["call"])
        if call is None:
            return self._reject(
                404, {"error": "unknown call", "reason": "no live call has this id (or it ended)"}
            )
        events = [to_tool_event(e, t_ns, self._secret, self.names) for e in items]
        del items, data, body  # the raw values go no further
        for ev in events:
            call.on_event(ev)
        self.accepted += len(events)
        return _json(202, {"accepted": len(events)})
