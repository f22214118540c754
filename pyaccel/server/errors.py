"""OpenAI-style errors: every failure answers `{"error": {"message", "type", "param", "code"}}`
with the status an OpenAI client maps to its exception classes."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import ContextOverflowError

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"


class APIError(Exception):
    """An error answered to the client as OpenAI does."""

    def __init__(self, status: int, message: str, type: str = INVALID_REQUEST, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def invalid(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """400: the request is malformed or asks for something this server cannot do."""
    return APIError(400, message, INVALID_REQUEST, param, code)


# pydantic's prefix of a message raised by a validator of ours ("Value error, n: ...").
VALUE_ERROR_PREFIX = "Value error, "


def from_validation(exc: ValidationError) -> APIError:
    """400 naming the first offending field, as `messages.0.role`; a check across fields
    names its field at the start of its message ("n: only n=1 ...")."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix(VALUE_ERROR_PREFIX)
    param = ".".join(str(p) for p in first["loc"]) or None
    if param is None:
        head, sep, _ = message.partition(": ")
        param = head if sep and head.isidentifier() else None
        return invalid(message, param=param, code="invalid_value" if param else None)
    return invalid(f"{param}: {message}", param=param, code="invalid_value")


def from_generation(exc: BaseException) -> APIError:
    """A generation that failed once running. The request's arguments were checked before
    it was queued, so only a prompt that leaves no room in the context is the caller's
    doing (400); anything else is the server's fault (500), whatever its exception type."""
    if isinstance(exc, APIError):  # worded by the server already (a shutdown)
        return exc
    if isinstance(exc, ContextOverflowError):
        return invalid(str(exc), code="context_length_exceeded")
    return APIError(500, f"generation failed: {type(exc).__name__}: {exc}", SERVER_ERROR)


def shutting_down(answered: bool = True) -> APIError:
    """503: the server stopped (SIGTERM, Ctrl-C) while this answer was being written, or
    (`answered` False) before the request was taken."""
    what = "this answer was cut short" if answered else "it takes no new requests"
    return APIError(503, f"the server is shutting down: {what}; retry when it is back", SERVER_ERROR,
                    code="server_shutting_down")


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Unknown routes (404) and wrong verbs (405), worded as OpenAI does."""
    assert isinstance(exc, HTTPException)
    what = f"{request.method} {request.url.path}"
    message = "unknown route" if exc.status_code == 404 else str(exc.detail)
    return APIError(exc.status_code, f"{message}: {what}", INVALID_REQUEST).response()


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    return APIError(500, f"internal error: {type(exc).__name__}: {exc}", SERVER_ERROR).response()
