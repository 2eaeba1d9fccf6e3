"""What byte-token streams delivered, as documents (byte tokenizer, end-of-text 256): the pieces a stream closes,
and the check that two worlds of readers delivered every document once.

    closed, rest = pieces(tokens)                  # the documents a stream closes, and the start of one left open
    each_document_once(docs, first, resumed)       # over both worlds: every document once, whole or cut by the change
"""

from __future__ import annotations

from fwe_cli.loader.tokenization.names import BYTE_EOS_ID


def pieces(tokens: list[int]) -> tuple[list[str], str]:
    """The documents a token stream closes (at its end-of-text ids), and the start of one it left open."""
    *closed, rest = bytes(t if t != BYTE_EOS_ID else 0 for t in tokens).decode().split("\0")
    return closed, rest


def each_document_once(docs: list[str], streams: list[list[int]], resumed: list[list[int]] = (),
                       maybe: list[str] = ()) -> None:
    """Every document of `docs` in `streams` (and a world that resumed them and read to the end) once: whole in one,
    or begun at the end of an old reader's stream and finished at the start of one of the new world's. Those of
    `maybe` (a mix's sources that do not end it: the mix ends before all of them are read) at most once, whole."""
    closed, begun = [], []
    for tokens in streams:
        done, rest = pieces(tokens)
        closed += done
        begun += [rest] if rest else []
    for tokens in resumed:
        done, rest = pieces(tokens)
        assert rest == ""  # the new world reads to the end of the source
        closed += done
    known = set(docs) | set(maybe)
    for start in begun:  # a document cut by the change of world: its rest is a piece of no whole document
        rests = [p for p in closed if start + p in known and p not in known]
        assert len(rests) == 1, (start, rests)
        closed.remove(rests[0])
        closed.append(start + rests[0])
    optional = set(maybe) - set(docs)
    read = [doc for doc in closed if doc in optional]
    assert len(read) == len(set(read)) and sorted(d for d in closed if d not in optional) == sorted(docs)
