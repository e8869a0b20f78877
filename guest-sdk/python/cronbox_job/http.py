"""Outbound HTTP for Python jobs, over ``wasi:http/outgoing-handler``.

Python's ``urllib`` needs sockets, which a job does not have; this small
blocking client goes through the host instead, so the job's grants, its
limits and the executor's network policy apply, as to any job::

    from cronbox_job import http

    response = http.get("https://api.example.com/status")
    if response.status != 200:
        raise JobFailed(f"status {response.status}")
    data = response.json()

A request the host refuses (no grant covers the origin, a limit reached)
or that fails (connection, TLS, timeout) raises :class:`HttpError`, whose
``code`` is the ``wasi:http`` error code (``HTTP-request-denied``, ...).
Redirects are not followed.
"""

import json as _json
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from componentize_py_types import Err
from wit_world.imports import outgoing_handler as _handler
from wit_world.imports import types as _types
from wit_world.imports.streams import StreamError_Closed

__all__ = ["HttpError", "Response", "request", "get", "post"]

# How much of a body is written or read per call.
_CHUNK = 16 * 1024

_METHODS = {
    "GET": _types.Method_Get,
    "HEAD": _types.Method_Head,
    "POST": _types.Method_Post,
    "PUT": _types.Method_Put,
    "DELETE": _types.Method_Delete,
    "OPTIONS": _types.Method_Options,
    "PATCH": _types.Method_Patch,
}


class HttpError(Exception):
    """A request that got no response; ``code`` names why."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code


class Response:
    """A response read whole: ``status``, ``headers`` and ``body``."""

    def __init__(self, status: int, headers: List[Tuple[str, bytes]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (any case), if present."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value.decode("latin-1")
        return None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return _json.loads(self.body)


def _code_name(error: Any) -> str:
    """``ErrorCode_HttpRequestDenied`` → ``HTTP-request-denied``."""
    name = type(error).__name__.removeprefix("ErrorCode_")
    words = []
    for char in name:
        if char.isupper() and words:
            words.append("-")
        words.append(char.lower())
    text = "".join(words)
    return text.replace("http-", "HTTP-", 1) if text.startswith("http-") else text


def _fail(error: Any) -> HttpError:
    detail = getattr(error, "value", None)
    return HttpError(_code_name(error), detail if isinstance(detail, str) else "")


def request(
    method: str,
    url: str,
    body: Optional[bytes] = None,
    headers: Optional[Dict[str, str]] = None,
    timeout_ms: Optional[int] = None,
) -> Response:
    """Sends one request and reads the whole response."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HttpError("HTTP-request-URI-invalid", f"not an http(s) URL: {url!r}")
    fields = _types.Fields.from_list(
        [(key, value.encode("utf-8")) for key, value in (headers or {}).items()]
    )
    outgoing = _types.OutgoingRequest(fields)
    verb = method.upper()
    outgoing.set_method(
        _METHODS[verb]() if verb in _METHODS else _types.Method_Other(verb)
    )
    outgoing.set_scheme(_types.Scheme_Https() if parts.scheme == "https" else _types.Scheme_Http())
    outgoing.set_authority(parts.netloc)
    outgoing.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    options = None
    if timeout_ms is not None:
        options = _types.RequestOptions()
        nanos = int(timeout_ms) * 1_000_000
        options.set_connect_timeout(nanos)
        options.set_first_byte_timeout(nanos)
    outgoing_body = outgoing.body()
    try:
        future = _handler.handle(outgoing, options)
    except Err as refused:
        raise _fail(refused.value) from None
    if body:
        with outgoing_body.write() as stream:
            try:
                for start in range(0, len(body), _CHUNK):
                    stream.blocking_write_and_flush(body[start : start + _CHUNK])
            except Err:
                pass  # the request failed: its error comes with the response
    try:
        _types.OutgoingBody.finish(outgoing_body, None)
    except Err as failed:
        raise _fail(failed.value) from None
    with future.subscribe() as ready:
        ready.block()
    answer = future.get()
    if answer is None or isinstance(answer, Err):
        raise HttpError("internal-error", "the response was not there to take")
    if isinstance(answer.value, Err):
        raise _fail(answer.value.value)
    response = answer.value.value
    status = response.status()
    received = response.headers().entries()
    incoming = response.consume()
    chunks = []
    with incoming.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(_CHUNK))
            except Err as ended:
                if isinstance(ended.value, StreamError_Closed):
                    break
                raise HttpError("HTTP-response-incomplete") from None
    return Response(status, received, b"".join(chunks))


def get(url: str, headers: Optional[Dict[str, str]] = None, timeout_ms: Optional[int] = None) -> Response:
    """``request("GET", url, ...)``."""
    return request("GET", url, headers=headers, timeout_ms=timeout_ms)


def post(
    url: str,
    body: bytes,
    headers: Optional[Dict[str, str]] = None,
    timeout_ms: Optional[int] = None,
) -> Response:
    """``request("POST", url, body, ...)``."""
    return request("POST", url, body=body, headers=headers, timeout_ms=timeout_ms)
