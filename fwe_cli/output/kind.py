"""What the shared output machinery needs to know about one kind of output (a bootstrap, a token directory).

    BOOTSTRAP = OutputKind(format="fwe-bootstrap/1", what="bootstrap", command="fwe bootstrap",
                           shape_problem=manifest_problem, listed=lambda manifest: manifest["files"])

An output's layout (loader/files/bootstrap_format.py Layout, tokens/layout.py TokensLayout) carries its kind and its paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Protocol


@dataclass(frozen=True)
class OutputKind:
    """One kind of crash-safe output: how its manifest is recognised and what it lists."""

    format: str
    """The manifest's `format` value; any other is not this kind's manifest."""
    what: str
    """How a message names the output: 'not an fwe {what}', '{what} at OUT is damaged'."""
    command: str
    """The command that writes it ('fwe bootstrap'): named by a refused second run and by verify hints."""
    shape_problem: Callable[[dict], str | None]
    """Why a manifest of this format is damaged (a missing or mistyped field), None when its shape is right."""
    listed: Callable[[dict], list[dict]]
    """The files a manifest lists, as {name, bytes, sha256} entries (names relative to the output's directory)."""

    def __post_init__(self) -> None:
        if not (self.format and self.what and self.command):
            raise ValueError("an OutputKind needs a format, a name for messages and its command")


class OutputLayout(Protocol):
    """The paths of one output, as the lock, the manifest writer, prepare and verify use them."""

    kind: ClassVar[OutputKind]
    out: str
    """What the user gave as --out, absolute."""

    @property
    def directory(self) -> str:
        """Where its files and its manifest live (the folder of a single-file output)."""

    @property
    def manifest_path(self) -> str: ...

    @property
    def lock_path(self) -> str: ...

    def own_files(self) -> list[tuple[str, int | None]]:
        """(path, number of the data file, or None for the manifest and its temporary) of every file of ours."""

    def has_foreign_files(self) -> bool:
        """Whether the output's directory holds files that are not ours."""

    def stale_files(self, manifest: dict) -> list[str]:
        """Files of ours that an interrupted run left and `manifest` (incomplete) does not stand behind."""
