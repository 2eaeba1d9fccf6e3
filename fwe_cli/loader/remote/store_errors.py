"""An object store's failures, read from the exception chain its client raised (botocore's ClientError and its
response, aiohttp's cut bodies, the errors s3fs translates them to): which are worth a retry (`normalized` gives them
the HTTP shape transient.py retries), and the one line each of the others ends as (`store_error`): a bucket that does
not exist, 403, missing credentials, another region, an endpoint that cannot be reached, an object replaced since it
was listed.
"""

from __future__ import annotations

import os

from fwe_cli.errors import FweError, SourceError
from fwe_cli.loader.remote.transient import TRANSIENT_STATUS, attempts_note, unreachable_reason

TRANSIENT_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling",
                             "ThrottlingException", "RequestTimeTooSkewed"})
# a body cut short, a connection closed under a read: the request is worth sending again
CUT = frozenset({"ClientPayloadError", "ServerDisconnectedError", "IncompleteRead", "ResponseStreamingError",
                 "ConnectionClosedError", "ContentLengthError", "ClientOSError", "ReadTimeoutError"})
DENIED = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "Forbidden"})
REGION = frozenset({"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException",
                    "Redirect"})


class _Answer:
    def __init__(self, status: int):
        self.status_code, self.headers = status, {}


class TransientStoreError(ConnectionError):
    """A failure worth retrying, shaped as transient.py reads one: an HTTP status (`response.status_code`), or a
    ConnectionError for a cut body."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.response = _Answer(status)


class UploadGone(SourceError):
    """A multipart upload the bucket no longer knows (NoSuchUpload): aborted since, or completed by an earlier run."""


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _client_error(exc: BaseException) -> tuple[int | None, str, str] | None:
    """(HTTP status, error code, message) of the first botocore ClientError in the chain."""
    for e in _chain(exc):
        response = getattr(e, "response", None)
        if isinstance(response, dict) and "Error" in response:
            meta = response.get("ResponseMetadata") or {}
            error = response.get("Error") or {}
            return meta.get("HTTPStatusCode"), str(error.get("Code") or ""), str(error.get("Message") or "")
    return None


def _names(exc: BaseException) -> set[str]:
    return {k.__name__ for e in _chain(exc) for k in type(e).__mro__}


def normalized(exc: BaseException) -> BaseException:
    """`exc` as the retry loop should see it: a TransientStoreError when it is worth retrying, else itself."""
    found = _client_error(exc)
    if found is not None:
        status, code, _ = found
        if status in TRANSIENT_STATUS or code in TRANSIENT_CODES:
            return TransientStoreError(f"HTTP {status} {code}".strip(), status or 503)
        return exc
    cut = _names(exc) & CUT
    if cut and not unreachable_reason(exc):
        return TransientStoreError(sorted(cut)[0])
    return exc


def endpoint(protocol: str) -> str:
    """Where requests of `protocol` go, as the environment says (for an error line)."""
    if protocol in ("s3", "s3a"):
        for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
            if os.environ.get(var):
                return f"{var}={os.environ[var]}"
        return "AWS's endpoint for the bucket's region (AWS_ENDPOINT_URL unset)"
    return f"the {protocol}:// service"


def store_error(exc: BaseException, url: str, what: str, protocol: str) -> BaseException:
    """The one-line error `exc` (a failed call to `what` `url`, retries spent) ends as."""
    if isinstance(exc, FweError):
        return exc
    note = attempts_note(exc)
    found = _client_error(exc)
    names = _names(exc)
    if found is not None:
        status, code, message = found
        if code == "NoSuchBucket":
            return SourceError(f"{url}: the bucket does not exist (asked {endpoint(protocol)})")
        if not code and status not in TRANSIENT_STATUS:  # S3 names every error it answers (a HEAD's by its status)
            return SourceError(f"{url}: {endpoint(protocol)} answered HTTP {status} with no S3 error: is it the "
                               "object store's endpoint?")
        if code == "NoSuchUpload":
            return UploadGone(f"{url}: its multipart upload is gone from the bucket (NoSuchUpload)")
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return SourceError(f"{url}: no such object")
        if code in DENIED or status == 403:
            return SourceError(f"{url}: access denied (HTTP 403 {code}): the credentials in use (AWS_PROFILE, "
                               f"AWS_ACCESS_KEY_ID, ...) may not {what} it")
        if code == "PreconditionFailed" or status == 412:
            return SourceError(f"{url} was replaced after it was listed (its ETag changed): it is read as one "
                               "version or not at all; restart the run (or resume over the new data)")
        if code in REGION or status == 301:
            return SourceError(f"{url}: the bucket is in another region ({code or status}): set AWS_REGION or "
                               "--storage-option client_kwargs.region_name=REGION")
        return SourceError(f"cannot {what} {url}{note}: HTTP {status} {code}: {message}".rstrip(": "))
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
        return SourceError(f"no credentials to {what} {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                           "AWS_PROFILE, or give --storage-option anon=true for a public bucket")
    if names & {"EndpointConnectionError", "ConnectTimeoutError"} or unreachable_reason(exc):
        return SourceError(f"cannot reach the object store for {url} ({endpoint(protocol)}){note}: "
                           f"{unreachable_reason(exc) or type(exc).__name__}")
    if isinstance(exc, PermissionError) or "PermissionError" in names:
        return SourceError(f"{url}: access denied ({exc})")
    if isinstance(exc, FileNotFoundError) or "FileNotFoundError" in names:
        return SourceError(f"{url}: no such object or prefix")
    reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
    return SourceError(f"cannot {what} {url}{note}: {reason}")
