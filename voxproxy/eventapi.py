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

Values arrive as keyed hashes (``*_hash``, kept as they are) or raw (``args``,
``result``, ``value``: any JSON), which are hashed here with the proxy's keyed
hash before anything is stored; idempotency keys are always hashed. The raw
value goes no further than this module. Each event is stamped with the
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
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

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

from voxproxy.events import TOOL_EVENT_KINDS, ToolEvent
from voxproxy.ids import keyed_hash
from voxproxy.livecalls import LiveCalls

log = logging.getLogger("voxproxy.eventapi")

MAX_BODY_BYTES = 256 * 1024
MAX_EVENTS_PER_REQUEST = 256
MIN_TOKEN_CHARS = 16
HASH_PREFIX = "h_"

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

    def _pick(self, raw: str, hashed: str, required: bool) -> None:
        given = [f for f in (raw, hashed) if f in self.model_fields_set]
        if len(given) == 2:
            raise ValueError(f"give either {raw} or {hashed}, not both")
        if required and not given:
            raise ValueError(f"{hashed} (or the raw {raw}, hashed by the proxy) is required")


class StateUpdatedIn(_In):
    type: Literal["state.updated"]
    field: Name
    version: Annotated[int, Field(ge=0)]
    value_hash: Hash | None = None
    value: JsonValue = None

    @model_validator(mode="after")
    def _value(self) -> StateUpdatedIn:
        self._pick("value", "value_hash", required=True)
        return self


class ToolStartedIn(_In):
    type: Literal["tool.started"]
    operation_id: OperationId
    tool: Name
    attempt: Annotated[int, Field(ge=1)] = 1
    state_version: Annotated[int, Field(ge=0)] | None = None
    args_hash: Hash | None = None
    args: JsonValue = None
    idempotency_key: Key | None = None

    @model_validator(mode="after")
    def _args(self) -> ToolStartedIn:
        self._pick("args", "args_hash", required=False)
        return self


class ToolFinishedIn(_In):
    type: Literal["tool.finished"]
    operation_id: OperationId
    status: Literal["ok", "error", "timeout", "malformed"]
    result_hash: Hash | None = None
    result: JsonValue = None

    @model_validator(mode="after")
    def _result(self) -> ToolFinishedIn:
        self._pick("result", "result_hash", required=False)
        return self


class ToolCancelledIn(_In):
    type: Literal["tool.cancelled"]
    operation_id: OperationId


class BackendVerifiedIn(_In):
    type: Literal["backend.verified"]
    operation_id: OperationId | None = None
    field: Name
    value_hash: Hash | None = None
    value: JsonValue = None

    @model_validator(mode="after")
    def _value(self) -> BackendVerifiedIn:
        self._pick("value", "value_hash", required=True)
        return self


class ConfirmationIn(_In):
    type: Literal["confirmation"]
    field: Name
    value_hash: Hash | None = None
    value: JsonValue = None

    @model_validator(mode="after")
    def _value(self) -> ConfirmationIn:
        self._pick("value", "value_hash", required=True)
        return self


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


def value_digest(secret: bytes, domain: str, value: Any) -> str:
    """The keyed hash of a raw value: strings as they are, anything else as canonical JSON."""
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return keyed_hash(secret, f"{domain}\x00{text}", HASH_PREFIX)


def _hashed(secret: bytes, e: _In, raw: str, hashed: str, domain: str) -> str | None:
    if raw in e.model_fields_set:
        return value_digest(secret, domain, getattr(e, raw))
    value = getattr(e, hashed)
    return value if isinstance(value, str) else None


def to_tool_event(e: _In, t_ns: int, secret: bytes) -> ToolEvent:
    """The content-free core event for a validated API event (raw values hashed here)."""
    if isinstance(e, StateUpdatedIn):
        return ToolEvent(
            e.type,
            t_ns,
            field=e.field,
            version=e.version,
            value_hash=_hashed(secret, e, "value", "value_hash", "value"),
        )
    if isinstance(e, ToolStartedIn):
        key = e.idempotency_key
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=e.operation_id,
            tool=e.tool,
            attempt=e.attempt,
            state_version=e.state_version,
            args_hash=_hashed(secret, e, "args", "args_hash", "args"),
            idempotency_key=None if key is None else value_digest(secret, "idempotency", key),
        )
    if isinstance(e, ToolFinishedIn):
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=e.operation_id,
            status=e.status,
            result_hash=_hashed(secret, e, "result", "result_hash", "result"),
        )
    if isinstance(e, ToolCancelledIn):
        return ToolEvent(e.type, t_ns, operation_id=e.operation_id)
    if isinstance(e, BackendVerifiedIn):
        return ToolEvent(
            e.type,
            t_ns,
            operation_id=e.operation_id,
            field=e.field,
            value_hash=_hashed(secret, e, "value", "value_hash", "value"),
        )
    if isinstance(e, ConfirmationIn):
        return ToolEvent(
            e.type,
            t_ns,
            field=e.field,
            value_hash=_hashed(secret, e, "value", "value_hash", "value"),
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


class EventTarget(Protocol):
    def on_event(self, ev: ToolEvent) -> None: ...


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers=headers,
    )


class EventApi:
    """The HTTP server of the event API, on the proxy's event loop."""

    def __init__(
        self,
        calls: LiveCalls[Any],
        secret: bytes,
        token: str,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the event API token must be at least {MIN_TOKEN_CHARS} characters")
        self._calls = calls
        self._secret = secret
        self._token = token.encode("utf-8")
        self._clock = clock
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.accepted = 0
        self.rejected = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/v1/calls/{call}/events", self._post)
        app.router.add_get("/healthz", self._health)
        return app

    async def start(self, host: str, port: int) -> int:
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("event API on http://%s:%d/v1/calls/{call}/events", host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _health(self, request: web.Request) -> web.Response:
        del request
        return web.Response(text="ok\n")

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
            body = await request.read()
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
        events = [to_tool_event(e, t_ns, self._secret) for e in items]
        del items, data, body  # the raw values go no further
        for ev in events:
            call.on_event(ev)
        self.accepted += len(events)
        return _json(202, {"accepted": len(events)})
