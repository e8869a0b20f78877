"""cronbox jobs in Python, built into components by componentize-py.

A job is a function (or a class with ``execute`` and optional ``init`` and
``destroy``) marked with :func:`job`::

    from cronbox_job import Context, job

    @job
    def execute(ctx: Context) -> str:
        return f"hello, {ctx.param or 'world'}"

The decorator defines ``WitWorld`` in the module it is used in, which is what
componentize-py exports. Build with ``cronbox build`` (or
``componentize-py -d wit -w job-with-http componentize app``).
Outbound HTTP is :mod:`cronbox_job.http`.

- A returned value (turned into a string; ``None`` is empty) is success.
  :func:`output` makes it a structured output (JSON text), which a
  workflow's templates read as JSON: ``return output({"rows": 3})``.
- Raising :class:`JobFailed` fails the run with its message and no traceback;
  any other exception fails it with ``Type: message`` and its traceback in
  the run's log.
- ``print`` and ``sys.stderr`` go to the run's log; so does :mod:`logging`
  (``ctx.log`` or any logger), at the record's level.
"""

import json
import logging
import sys
import traceback
from typing import Any, Callable, Optional

import wit_world
from componentize_py_types import Err
from wit_world.imports import context as _context
from wit_world.imports import store as _store

__all__ = [
    "Context",
    "JobFailed",
    "KeyTooLarge",
    "QuotaExceeded",
    "StateError",
    "ValueTooLarge",
    "job",
    "output",
]


def output(value: Any) -> str:
    """``value`` as compact JSON text: a structured output, which a
    workflow's templates read as JSON. A workflow node's output is at most
    64 KiB."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class JobFailed(Exception):
    """Fails the run with this message (no traceback in the log)."""


class StateError(Exception):
    """A state write the host refused; the run goes on unless re-raised."""


class KeyTooLarge(StateError):
    """The key is empty or longer than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"state key is empty or longer than {limit} bytes")
        self.limit = limit


class ValueTooLarge(StateError):
    """The value is longer than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"state value is longer than {limit} bytes")
        self.limit = limit


class QuotaExceeded(StateError):
    """The write would take the job's state past ``limit`` bytes in all."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the job's state would exceed {limit} bytes")
        self.limit = limit


_KINDS = {
    _context.TriggerKind.SCHEDULE: "schedule",
    _context.TriggerKind.MANUAL: "manual",
    _context.TriggerKind.API: "api",
    _context.TriggerKind.RETRY: "retry",
    _context.TriggerKind.PARENT: "parent",
    _context.TriggerKind.MISFIRE: "misfire",
}


class _HostHandler(logging.Handler):
    """Sends log records to the run's log at their level."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
        except Exception:  # a bad format string must not fail the run
            message = str(record.msg)
        if record.levelno >= logging.ERROR:
            level = _context.Level.ERROR
        elif record.levelno >= logging.WARNING:
            level = _context.Level.WARN
        elif record.levelno >= logging.INFO:
            level = _context.Level.INFO
        else:
            level = _context.Level.DEBUG
        _context.log(level, message)


_root = logging.getLogger()
_root.handlers[:] = [_HostHandler()]
_root.setLevel(logging.DEBUG)


# The parameter a `cronbox dev` run carries for the job, its own being the
# job's sources (see `cronbox_dev_runner`); None otherwise.
_dev_param: Optional[str] = None

# The WitWorld of the job the last `@job` marked (the dev runner's way to
# the job of the sources it imported).
_registered: Any = None


class Context:
    """The run now executing, its durable state and its configuration."""

    def __init__(self) -> None:
        trigger = _context.current()
        #: The trigger's parameter ("" when none was given).
        self.param: str = trigger.param if _dev_param is None else _dev_param
        self.job_id: int = trigger.job_id
        self.run_id: int = trigger.run_id
        #: This run's shard, 0 to ``shard_total - 1``.
        self.shard_index: int = trigger.shard_index
        self.shard_total: int = trigger.shard_total
        #: Why the run started: schedule, manual, api, retry, parent, misfire.
        self.kind: str = _KINDS.get(trigger.kind, "schedule")
        #: The instant the run was scheduled for, ms since the Unix epoch.
        self.scheduled_at_ms: int = trigger.scheduled_at_ms
        #: 0 for a first attempt, n for the n-th retry.
        self.attempt: int = trigger.attempt
        #: A logger writing to the run's log.
        self.log: logging.Logger = logging.getLogger("job")

    def get(self, key: str) -> Optional[str]:
        """The job's state for ``key``, including this run's writes."""
        return _context.get(key)

    def set(self, key: str, value: str) -> None:
        """Writes state (committed only if the run succeeds).

        Raises a :class:`StateError` past the host's size limits.
        """
        try:
            _context.set(key, value)
        except Err as refused:
            error = refused.value
            if isinstance(error, _context.StateError_KeyTooLarge):
                raise KeyTooLarge(error.value) from None
            if isinstance(error, _context.StateError_ValueTooLarge):
                raise ValueTooLarge(error.value) from None
            raise QuotaExceeded(error.value) from None

    def remove(self, key: str) -> None:
        """Removes ``key`` from the job's state."""
        _context.remove(key)

    def config(self, key: str) -> Optional[str]:
        """The job's configuration for ``key`` (None when not set)."""
        try:
            return _store.get(key)
        except Err:
            return None

    def secret(self, name: str) -> Optional[str]:
        """The tenant's secret ``name`` when the job references it.

        Masked as ``********`` wherever the run prints it.
        """
        return self.config(name)


def _failure(error: BaseException) -> Err:
    """The run's failure for an exception, with its traceback logged."""
    if isinstance(error, JobFailed):
        return Err(str(error))
    trace = "".join(traceback.format_exception(error)).rstrip()
    _context.log(_context.Level.ERROR, trace)
    return Err(f"{type(error).__name__}: {error}")


def _flush() -> None:
    """Writes what ``print`` buffered to the run's log now."""
    sys.stdout.flush()
    sys.stderr.flush()


def job(target: Any) -> Any:
    """Marks the job: a function ``execute(ctx)``, or a class whose
    instances have ``execute(ctx)`` and optionally ``init(ctx)`` and
    ``destroy()``. Defines ``WitWorld`` in the caller's module."""
    if isinstance(target, type):
        make: Callable[[], Any] = target
    else:
        function = target

        class _FunctionJob:
            def execute(self, ctx: Context) -> Any:
                return function(ctx)

        make = _FunctionJob

    # componentize-py may make a new WitWorld for each call: the job's
    # instance lives here, once per component instance.
    holder: dict = {}

    def instance() -> Any:
        if "job" not in holder:
            holder["job"] = make()
        return holder["job"]

    class WitWorld(wit_world.WitWorld):
        def init(self) -> None:
            try:
                init = getattr(instance(), "init", None)
                if init is not None:
                    init(Context())
            except Exception as error:
                raise _failure(error) from None
            finally:
                _flush()

        def execute(self) -> str:
            try:
                result = instance().execute(Context())
            except Exception as error:
                raise _failure(error) from None
            finally:
                _flush()
            return "" if result is None else str(result)

        def destroy(self) -> None:
            destroy = getattr(holder.get("job"), "destroy", None)
            if destroy is not None:
                try:
                    destroy()
                except Exception as error:
                    _failure(error)
                finally:
                    _flush()

    module = sys.modules.get(getattr(target, "__module__", ""), None)
    if module is not None:
        module.WitWorld = WitWorld  # type: ignore[attr-defined]
    global _registered
    _registered = WitWorld
    return target
