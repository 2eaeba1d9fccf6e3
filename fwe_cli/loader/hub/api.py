"""The Hub's API as the native reader's listing calls it (fwe_cli/loader/hub/listing.py): the dataset at a
revision (commit, card, file names), the sizes and LFS sha256 of some of its files (paths-info), and which commit a
branch is (one HEAD), over fwe's own kept-alive connections (fwe_cli/loader/remote/http.py): the calls huggingface_hub's
dataset_info and get_paths_info make. Each is retried while the Hub answers 429/5xx; a Hub that cannot be reached is
one line saying so and how to go on without it.
"""

from __future__ import annotations

import os

import orjson

from fwe_cli.errors import SourceError
from fwe_cli.loader.remote.hub_env import endpoint, resolve_url
from fwe_cli.loader.remote.transient import attempts_note, call_with_retries, transient_reason

# The first request's connect and read timeout: a Hub that never answers ends the run after it, well inside the 10 s
# a user waits for the message, and a working Hub starts its answer well within it. A Hub that cannot be reached
# (refused, no answer) is not asked again; one that answers 429/5xx is, with backoff (HUB_RETRY). Once it has
# answered, a request may take ANSWERED_TIMEOUT_S (huggingface_hub's default read timeout).
OPEN_TIMEOUT_S = 3.0
ANSWERED_TIMEOUT_S = 10.0


def unreachable_message(reason: str) -> str:
    """The one line for a Hub that cannot be reached, with the ways to go on without it."""
    return (f"cannot reach the Hub at {endpoint()} ({reason}); without it: HF_HUB_OFFLINE=1 reads a warm cache, "
            "--local-path DIR reads files (fwe bootstrap makes them), --source synthetic needs nothing")


def ask(call, what: str, repo: str):
    """One Hub API call, retried while the Hub answers 429/5xx; any failure as SourceError naming the dataset, and a
    Hub that cannot be reached (refused, no answer; 5xx after the retries) as the unreachable message."""
    try:
        return call_with_retries(call, what, fail_fast=True)
    except SourceError:
        raise
    except Exception as exc:  # HTTP statuses, OSErrors, a body that is not JSON: the cause stays chained
        found = transient_reason(exc)
        if found is not None:
            raise SourceError(unreachable_message(f"{what}: {found[0]}{attempts_note(exc)}")) from None  # says it all
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise SourceError(f"Hub dataset {repo!r}: {what} failed: {type(exc).__name__}: {first_line}") from exc


def dataset_at(repo: str, revision: str) -> dict:
    """The dataset's info at `revision`: its commit `sha`, `siblings` (file names) and `cardData`."""
    from urllib.parse import quote

    url = f"{endpoint()}/api/datasets/{repo}/revision/{quote(revision, safe='')}"
    info = ask(lambda: _api(url), f"reading {repo} at {revision}", repo)
    if not isinstance(info, dict) or not info.get("sha"):
        raise SourceError(f"Hub dataset {repo!r}: {endpoint()} did not say which commit {revision!r} is")
    return info


def paths_info(repo: str, sha: str, paths: list[str]) -> list[dict]:
    """paths-info of these paths at commit `sha`: each one's type, path, size and, in LFS, `lfs.oid` (its sha256)."""
    from urllib.parse import urlencode

    form = urlencode({"paths": paths, "expand": "false"}, doseq=True).encode()
    return ask(lambda: _api(f"{endpoint()}/api/datasets/{repo}/paths-info/{sha}", form, _answered_timeout()),
               f"listing {len(paths)} files of {repo}", repo)


def _api(url: str, body: bytes | None = None, timeout: float = OPEN_TIMEOUT_S) -> object:
    """The JSON answer of one Hub API call (a POST when there is a form body)."""
    from fwe_cli.loader.remote.http import request

    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
    with request("POST" if body is not None else "GET", url, headers, body, timeout=timeout) as answer:
        return orjson.loads(answer.read())


def _answered_timeout() -> float:
    """Per request once the Hub has answered (it is there; a listing of thousands of files takes a while):
    HF_HUB_DOWNLOAD_TIMEOUT, as huggingface_hub reads it, else ANSWERED_TIMEOUT_S."""
    try:
        return float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or ANSWERED_TIMEOUT_S)
    except ValueError:
        return ANSWERED_TIMEOUT_S


def head_revision(repo: str, revision: str) -> str:
    """The commit a branch or tag points at now: one HEAD request (the X-Repo-Commit header of the card's resolve
    URL), on a kept-alive connection (http.py) that the listing's calls reuse when the branch moved."""
    from fwe_cli.loader.remote.http import request

    url = resolve_url(repo, revision, "README.md")

    def commit() -> str | None:
        with request("HEAD", url, timeout=OPEN_TIMEOUT_S) as answer:
            return answer.headers.get("x-repo-commit")

    sha = ask(commit, f"checking which commit {repo}@{revision} is", repo)
    if not sha:
        raise SourceError(f"Hub dataset {repo!r}: {endpoint()} did not say which commit {revision!r} is")
    return sha
