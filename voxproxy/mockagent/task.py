"""The mock agent's task: live state, a simulated tool backend, and the tool calls between them.

This is the outcome testbench's agent (MEASUREMENT.md sections 5-6). The mock cannot
understand speech, so a **task script** (:mod:`voxproxy.simcall.script`) tells it what
each of the caller's turns means and what the tool backend does with each request.

Caller turns are counted as the mock's own VAD closes them, voiced spurts only (a
noise the faulty agent takes for speech is a turn without meaning). Turn ``i``
means ``script.turns[i]``; turns past the end mean nothing.

What the agent does, when it does it right:

* each state change is posted as ``state.updated`` with a new version (one counter
  per call);
* the action is built ``prep_ms`` after the state it needs is stable; a barge-in
  abandons a build (the agent listens; it builds again when the caller's turn
  ends) and a state change restarts it, so ``tool.started`` always carries the
  latest ``state_version``, its arguments, a stable operation id and an
  idempotency key (one per state version);
* a call in flight is cancelled (``tool.cancelled``; the backend drops a write that
  has not landed) on a barge-in, a correction or a withdrawal, and the action is
  re-issued from the new state when the caller's turn ends;
* results are checked (the answer names the record and carries the values asked
  for, and the backend, read back, holds them); a timeout (no answer within
  ``tool_timeout_ms``), an error or a bad result is retried with the same
  operation id and idempotency key, up to ``tool_max_attempts``; then it gives
  up and tells the caller what the backend holds;
* it confirms (``confirmation``) only what the backend holds, after the write;
  a withdrawal is confirmed the same way ("nothing was sent").

Each fault switch of :class:`~voxproxy.mockagent.config.MockAgentConfig` breaks one
of those (and is logged in :attr:`TaskLog.faults` when it changes what the agent did):

* ``fault_stale_args``: a build is never restarted; its arguments are the state
  as it was when the build began (a correction during the build is ignored);
* ``fault_no_cancel``: a call in flight is never cancelled (barge-in, correction,
  withdrawal); when it finishes, the agent takes it as the action for the state it
  has by then;
* ``fault_unchecked_result``: any answer is taken as success (``status: ok``), never
  read back; the agent confirms what it believes it wrote;
* ``noise_is_speech`` (the existing switch): a cough over the agent's speech is a
  barge-in and a turn;
* ``fault_unsafe_retry``: no idempotency keys, and each retry gets a new operation id;
* ``fault_confirm_before_result``: on an asynchronous tool's "pending"
  acknowledgement, the agent confirms at once.

The backend is honest whatever the agent does: it posts ``backend.verified`` (what
the record really holds) when the agent first looks the record up and after every
write it applies, or answers from its idempotency table, and after a cancel (what the
record holds once the pending write was dropped). An independent check posts
``outcome.verified`` (does the backend hold what the agent last promised?) after each
confirmation, and again after each later write (a write that lands after the promise
can break it, or make it come true). Every event goes out in order through one queue
per call.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voxproxy.simcall.script import Attempt, Json, TaskFault, TaskScript, Turn

if TYPE_CHECKING:
    from voxproxy.mockagent.config import MockAgentConfig
    from voxproxy.simcall.log import TaskLog

# -- the backend --------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    fields: dict[str, Json]
    version: int = 0  # writes applied


class SimBackend:
    """An in-process tool backend: one record per call (with a version), and an
    idempotency table. It knows nothing of agents; the task drives it."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.keys: dict[str, dict[str, Json]] = {}  # idempotency key -> the stored answer
        self.writes = 0

    def open(self, rid: str, initial: Mapping[str, Json]) -> None:
        if rid not in self.records:
            self.records[rid] = Record(copy.deepcopy(dict(initial)))

    def read(self, rid: str) -> dict[str, Json]:
        return copy.deepcopy(self.records[rid].fields)

    def apply(
        self, rid: str, script: TaskScript, args: Mapping[str, Json], key: str | None
    ) -> tuple[dict[str, Json], bool]:
        """Apply the tool's write; returns (answer, wrote). A known key writes nothing and
        answers what it answered the first time."""
        if key is not None and key in self.keys:
            return copy.deepcopy(self.keys[key]), False
        rec = self.records[rid]
        if script.effect == "set":
            for f in script.args:
                rec.fields[f] = copy.deepcopy(args.get(f))
        else:
            assert script.record is not None
            rec.fields[script.record] = [*rec.fields.get(script.record, []), dict(args)]
        rec.version += 1
        self.writes += 1
        answer = {
            "record": rid,
            "version": rec.version,
            "fields": {f: copy.deepcopy(rec.fields[f]) for f in script.written},
        }
        if key is not None:
            self.keys[key] = copy.deepcopy(answer)
        return answer, True


# -- the agent's task ---------------------------------------------------------------------

Send = Callable[[list[dict[str, Any]]], Awaitable[object]]
_ERROR = {"error": "internal server error", "status": 500}


@dataclass(slots=True)
class _Request:
    """One attempt at the backend: its acknowledgement and answer, when they come."""

    ack: asyncio.Future[None]
    answer: asyncio.Future[tuple[str, Json]]  # ("ok" | "error", payload)
    runner: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _Build:
    version: int
    args: dict[str, Json]
    runner: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _Flight:
    version: int
    args: dict[str, Json]
    op: str
    key: str | None
    attempt: int = 1
    requests: list[_Request] = field(default_factory=list)
    runner: asyncio.Task[None] | None = None


class Task:
    """One call's task. The call feeds it turns and barge-ins; it posts its events, in
    order, through ``send`` (None: they are only logged)."""

    def __init__(
        self,
        script: TaskScript,
        config: MockAgentConfig,
        backend: SimBackend,
        rid: str,
        log: TaskLog,
        send: Send | None = None,
    ) -> None:
        self.script = script
        self.cfg = config
        self.backend = backend
        self.rid = rid  # the backend record of this call (and the prefix of its ids)
        self.log = log
        self._send = send
        self.state: dict[str, Json] = {}
        self.version = 0
        self.intent = False
        self.listening = False  # a barge-in is under way: nothing is built until it ends
        self.build: _Build | None = None
        self.flight: _Flight | None = None
        self.done_version: int | None = None  # the state version whose action took effect
        self.confirmed_version: int | None = None
        self._ops = 0
        self._requests = 0  # requests made to the backend: the script's attempts count these
        self._kept = False  # a call was kept in flight across a barge-in (the no_cancel fault)
        self._promise: dict[str, Json] | None = None  # what the agent last confirmed
        self._opened = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._outbox: asyncio.Queue[list[dict[str, Any]]] | None = None
        backend.open(rid, script.backend)

    # -- what the call tells it -----------------------------------------------------------

    def on_caller_turn(self, voiced: bool) -> None:
        """The caller's turn ended (``voiced`` False: a noise the agent took for speech)."""
        self.listening = False
        if self._kept and voiced:
            self._fault("no_cancel")  # kept across a real barge-in (across a noise, rightly)
        self._kept = False
        if not voiced:
            self._fault("noise_is_speech")
            self._replan()
            return
        index = self.log.turns
        self.log.turns += 1
        if not self._opened:  # the agent looks the record up
            self._opened = True
            self._verified(None)
        meaning = self.script.turns[index] if index < len(self.script.turns) else Turn()
        for name, value in meaning.updates:
            self.state[name] = copy.deepcopy(value)
            self.version += 1
            self._emit(
                [{"type": "state.updated", "field": name, "version": self.version, "value": value}]
            )
        withdrawn = meaning.negate and self.intent
        if meaning.negate:
            self.intent = False
        if meaning.act:
            self.intent = True
        self._replan(withdrawn)

    def on_barge_in(self) -> None:
        """The caller (or, for an agent that takes noise for speech, a noise) started over
        the agent's speech, and the agent yields."""
        self.listening = True
        if self.flight is not None:
            if self.cfg.fault_no_cancel:
                self._kept = True
            else:
                self._cancel_flight()
        if self.build is not None and not self.cfg.fault_stale_args:
            self._cancel_build()

    def on_caller_quiet(self) -> None:
        """Caller speech stopped without making a turn (too short): stop listening."""
        self._kept = False
        if self.listening:
            self.listening = False
            self._replan()

    async def aclose(self) -> None:
        """The call ended: cancel every timer, attempt and pending post; log the record."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.log.backend = self.backend.read(self.rid)

    # -- planning -------------------------------------------------------------------------

    def _replan(self, withdrawn: bool = False) -> None:
        if self.listening:
            return
        cfg = self.cfg
        if not self.intent:
            if self.flight is not None:
                if cfg.fault_no_cancel:
                    self._fault("no_cancel")
                else:
                    self._cancel_flight()
            if self.build is not None and not cfg.fault_stale_args:
                self._cancel_build()
            if withdrawn:
                self._tell(None)
            return
        target = self.version
        if self.flight is not None:
            if self.flight.version == target:
                return
            if cfg.fault_no_cancel:
                self._fault("no_cancel")
                return  # the call in flight will do
            self._cancel_flight()
        if self.build is not None:
            if self.build.version == target:
                return
            if cfg.fault_stale_args:
                return  # the build goes on from its snapshot
            self._cancel_build()
        if self.done_version == target:
            return
        b = _Build(self.version, self._args())
        self.build = b
        b.runner = self._spawn(self._build(b))

    def _args(self) -> dict[str, Json]:
        return {f: copy.deepcopy(self.state.get(f)) for f in self.script.args}

    def _tracks_versions(self) -> bool:
        """Whether the agent knows which state version each call was built from."""
        return not (self.cfg.fault_no_cancel or self.cfg.fault_stale_args)

    async def _build(self, b: _Build) -> None:
        await asyncio.sleep(self.script.prep_ms / 1000)
        if self.build is not b:
            return
        self.build = None
        if b.version != self.version or not self.intent:
            self._fault("stale_args")  # only a builder that is never restarted gets here
        self._ops += 1
        op = f"op-{self.rid}-{self._ops}"
        key = None if self.cfg.fault_unsafe_retry else f"ik-{self.rid}-v{b.version}"
        f = _Flight(b.version, b.args, op, key)
        self.flight = f
        f.runner = self._spawn(self._execute(f))

    def _cancel_build(self) -> None:
        b, self.build = self.build, None
        if b is not None and b.runner is not None:
            b.runner.cancel()

    def _cancel_flight(self) -> None:
        f, self.flight = self.flight, None
        if f is None:
            return
        self._emit([{"type": "tool.cancelled", "operation_id": f.op}])
        for req in f.requests:
            if req.runner is not None:
                req.runner.cancel()  # the backend drops a write that has not landed
        if f.runner is not None:
            f.runner.cancel()
        self._verified(f.op)  # what the record holds after the cancel

    def _verified(self, op: str | None) -> None:
        """The backend's ``backend.verified``: what the record really holds, for ``op``."""
        stored = self.backend.read(self.rid)
        self._emit(
            [
                {"type": "backend.verified", "field": f, "value": stored[f]}
                | ({"operation_id": op} if op is not None else {})
                for f in self.script.written
            ]
        )

    # -- one action: attempts, results, confirmation --------------------------------------

    async def _execute(self, f: _Flight) -> None:
        cfg = self.cfg
        while True:
            self._requests += 1
            step = self.script.attempt(self._requests)
            started: dict[str, Any] = {
                "type": "tool.started",
                "operation_id": f.op,
                "tool": self.script.tool,
                "attempt": f.attempt,
                "state_version": f.version,
                "args": f.args,
            }
            if f.key is not None:
                started["idempotency_key"] = f.key
            self._emit([started])
            req = _Request(self._future(), self._future())
            f.requests.append(req)
            req.runner = self._spawn(self._serve(f.op, req, step, f.args, f.key))
            status, payload = await self._outcome(req, step)
            finished: dict[str, Any] = {"type": "tool.finished", "operation_id": f.op}
            if status == "timeout":
                self._emit([{**finished, "status": "timeout"}])
            elif status == "error":
                self._emit([{**finished, "status": "error", "result": payload}])
            else:
                good = self._checks_out(payload, f.args)
                if good or cfg.fault_unchecked_result:
                    if not good:
                        self._fault("unchecked_result")
                    self._emit([{**finished, "status": "ok", "result": payload}])
                    if self.flight is f:
                        self.flight = None
                    self._completed(f)
                    return
                self._emit([{**finished, "status": "malformed", "result": payload}])
            if f.attempt >= cfg.tool_max_attempts:
                if self.flight is f:
                    self.flight = None
                self.done_version = f.version  # given up: tell the caller what is there
                self._tell(None)
                return
            f.attempt += 1
            if cfg.fault_unsafe_retry:
                self._fault("unsafe_retry")
                self._ops += 1
                f.op = f"op-{self.rid}-{self._ops}"

    async def _outcome(self, req: _Request, step: Attempt) -> tuple[str, Json]:
        loop = asyncio.get_running_loop()
        timeout = self.cfg.tool_timeout_ms / 1000
        deadline = loop.time() + timeout
        if step.kind == "async" and self.cfg.fault_confirm_before_result:
            try:
                await asyncio.wait_for(asyncio.shield(req.ack), timeout)
            except TimeoutError:
                pass
            else:
                if self.confirmed_version != self.version:
                    self._fault("confirm_before_result")
                    self._tell(self._args() if self.intent else None, early=True)
        try:
            return await asyncio.wait_for(
                asyncio.shield(req.answer), max(0.0, deadline - loop.time())
            )
        except TimeoutError:
            return ("timeout", None)

    def _checks_out(self, payload: Json, args: Mapping[str, Json]) -> bool:
        """The answer names this record and carries what was asked, and the backend, read
        back, holds it (the faulty agent never reads back)."""
        if not isinstance(payload, dict) or payload.get("record") != self.rid:
            return False
        fields = payload.get("fields")
        if not isinstance(fields, dict):
            return False
        record = self.script.record if self.script.effect == "append" else None
        if record is not None:  # append: the new entry is there
            got = fields.get(record)
            if not isinstance(got, list) or dict(args) not in got:
                return False
        elif any(fields.get(k) != v for k, v in self.script.projection(args).items()):
            return False
        if self.cfg.fault_unchecked_result:
            return True
        stored = self.backend.read(self.rid)
        if record is not None:
            kept = stored.get(record)
            return isinstance(kept, list) and dict(args) in kept
        return all(stored.get(k) == v for k, v in self.script.projection(args).items())

    def _completed(self, f: _Flight) -> None:
        if not self.intent:
            return  # withdrawn while in flight and not cancelled: the caller was told already
        if self._tracks_versions():
            self.done_version = f.version
            self._tell(f.args)
        else:
            self.done_version = self.version  # it takes the call for what the state is now
            if self.confirmed_version != self.version:
                self._tell(self._args())
        self._replan()

    def _tell(self, args: Mapping[str, Json] | None, early: bool = False) -> None:
        """Confirm to the caller what the backend holds (read back), or, for an agent that
        does not check (or confirms early), what it believes the action with ``args``
        (None: no action) left there. The independent outcome check follows."""
        stored = self.backend.read(self.rid)
        if early or self.cfg.fault_unchecked_result:
            values = self.script.projection(args)
        else:
            values = {f: stored.get(f) for f in self.script.written}
        events: list[dict[str, Any]] = [
            {"type": "confirmation", "field": k, "value": v} for k, v in values.items()
        ]
        self._emit(events)
        self.confirmed_version = self.version
        self._promise = values
        self._check_promise()

    def _check_promise(self) -> None:
        """The independent outcome check: does the backend hold what was last promised?"""
        if self._promise is None:
            return
        stored = self.backend.read(self.rid)
        verified = all(stored.get(k) == v for k, v in self._promise.items())
        self._emit([{"type": "outcome.verified", "verified": verified}])

    # -- the backend side of one attempt --------------------------------------------------

    async def _serve(
        self, op: str, req: _Request, step: Attempt, args: Mapping[str, Json], key: str | None
    ) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if step.kind == "async":
            await asyncio.sleep(step.ack_ms / 1000)
            if not req.ack.done():
                req.ack.set_result(None)
        await asyncio.sleep(max(0.0, t0 + step.latency_ms / 1000 - loop.time()))
        status = "ok"
        payload: Json = None
        if step.commits:
            payload, _wrote = self.backend.apply(self.rid, self.script, args, key)
            self._verified(op)
            self._check_promise()
            if step.kind == "error":
                status, payload = "error", dict(_ERROR)
        elif step.kind == "empty":
            payload = {}
        elif step.kind == "wrong_record":
            fields = self.script.projection(args)
            payload = {"record": f"{self.rid}-other", "version": 1, "fields": fields}
        elif step.kind == "malformed":
            payload = '{"record": "' + self.rid + '", "fields": {'
        else:  # told not to commit: the handler failed before the write
            status, payload = "error", dict(_ERROR)
        after = step.answer_after_ms
        if after is None:
            return
        await asyncio.sleep(max(0.0, t0 + after / 1000 - loop.time()))
        if not req.answer.done():
            req.answer.set_result((status, payload))

    # -- plumbing -------------------------------------------------------------------------

    def _emit(self, events: list[dict[str, Any]]) -> None:
        """Log ``events`` and queue them for posting, in order, as one request."""
        if not events:
            return
        batch = copy.deepcopy(events)
        self.log.events.extend(batch)
        if self._send is None:
            return
        if self._outbox is None:
            self._outbox = asyncio.Queue()
            self._spawn(self._poster(self._outbox, self._send))
        self._outbox.put_nowait(batch)

    @staticmethod
    async def _poster(outbox: asyncio.Queue[list[dict[str, Any]]], send: Send) -> None:
        while True:
            batch = await outbox.get()
            await send(batch)

    def _fault(self, name: TaskFault) -> None:
        if name not in self.log.faults:
            self.log.faults.append(name)

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._reap)
        return task

    def _reap(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.errors.append(repr(task.exception()))
