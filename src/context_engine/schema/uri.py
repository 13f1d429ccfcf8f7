"""Context URIs (DESIGN.md §1).

``ctx://resources/<path>``, ``ctx://user/<user_space>/<path>``, ``ctx://agent/<agent_space>/<path>``. Segments are
Unicode (CJK allowed), NFC-normalised, never empty, blank (also `` .md``), ``.``, ``..``, and never contain ``/``,
``\\``, ``:``, control characters or lone surrogates; the whole URI is at most 1,024 UTF-8 bytes. A trailing ``/``
marks a directory. Segments that equal the content store's internal file names are reserved, so a directory can
never be mistaken for node content.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from context_engine.errors import ContextEngineError, ErrorCode

SCHEME = "ctx://"
MAX_URI_BYTES = 1024
MAX_SEGMENT_BYTES = 255  # one file-system name
RESERVED_SEGMENTS = frozenset({".abstract.md", ".overview.md", ".content.md", ".node"})

Scope = Literal["resources", "user", "agent"]
ContextType = Literal["memory", "skill", "resource"]
_SCOPES: tuple[str, ...] = ("resources", "user", "agent")


def _invalid(uri: str, why: str) -> ContextEngineError:
    shown = uri if len(uri) <= 120 else uri[:117] + "..."
    return ContextEngineError(ErrorCode.URI_INVALID, f"invalid URI {shown!r}: {why}", {"reason": why})


# What no segment may hold, in one C-level search: the separators, and for an ASCII segment every character of the
# categories refused below (ASCII has only Cc ones: U+0000-U+001F and U+007F). A parse of a URI first seen costs
# its segments' validation, and a search meets a few hundred new URIs (expansion, hydration): the per-character
# category loop was ~1 ms of a cold 1M-node search (bench/search_memory.py, first pass against the next).
_ASCII_REFUSED = re.compile(r"[\x00-\x1f\x7f/\\:]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def validate_segment(segment: str, uri: str = "") -> str:
    """Return the NFC form of one path segment or raise ``WRT-4001`` saying what is wrong with it."""
    seg = unicodedata.normalize("NFC", segment)
    if seg == "":
        raise _invalid(uri or segment, "empty path segment (double '/')")
    if not seg.strip():
        raise _invalid(uri or segment, "blank path segment (only whitespace)")
    stem = seg.rsplit(".", 1)[0]
    if stem and not stem.strip():  # " .md": a name of only whitespace before its extension
        raise _invalid(uri or segment, "blank name before the extension")
    if seg in (".", ".."):
        raise _invalid(uri or segment, f"segment {seg!r} is not allowed")
    if seg in RESERVED_SEGMENTS:
        raise _invalid(uri or segment, f"segment {seg!r} is a reserved internal name")
    # the first refused character names the problem
    if seg.isascii():
        found = _ASCII_REFUSED.search(seg)
        ch = None if found is None else found.group()
    else:
        ch = next((c for c in seg if c in "/\\:" or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if ch is not None:
        if ch in "/\\:":
            raise _invalid(uri or segment, f"character {ch!r} is not allowed inside a segment")
        raise _invalid(uri or segment, f"control character U+{ord(ch):04X} is not allowed")
    if not seg.isascii() and _SURROGATE.search(seg):
        raise _invalid((uri or segment).encode("utf-8", "backslashreplace").decode(), "contains a lone surrogate")
    if len(seg.encode()) > MAX_SEGMENT_BYTES:
        raise _invalid(uri or segment, f"segment longer than {MAX_SEGMENT_BYTES} bytes")
    return seg


@dataclass(frozen=True, slots=True)
class ContextURI:
    """A parsed, validated, NFC-normalised context URI.

    Attributes:
        scope: ``resources``, ``user`` or ``agent``.
        space: the user or agent space (``None`` for ``resources``).
        segments: path segments below the scope root (and below the space for user/agent).
        is_dir: ``True`` when the URI names a directory (written with a trailing ``/``).
    """

    scope: Scope
    space: str | None
    segments: tuple[str, ...]
    is_dir: bool

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def parse(cls, uri: str) -> ContextURI:
        """Parse and validate ``uri`` (results of valid URIs are cached: a search parses the same few hundred).

        Raises:
            ContextEngineError: ``WRT-4001`` with a message naming the problem.
        """
        if not isinstance(uri, str):
            raise _invalid(repr(uri), "a URI must be a string")
        return _parse_cached(uri) if cls is ContextURI else cls._parse(uri)

    @classmethod
    def _parse(cls, uri: str) -> ContextURI:
        raw = unicodedata.normalize("NFC", uri.strip())
        if not raw.isascii() and _SURROGATE.search(raw):  # a lone surrogate cannot be stored or encoded
            raise _invalid(raw.encode("utf-8", "backslashreplace").decode(), "contains a lone surrogate character")
        if len(raw.encode()) > MAX_URI_BYTES:
            raise _invalid(raw, f"longer than {MAX_URI_BYTES} bytes")
        if not raw.startswith(SCHEME):
            raise _invalid(raw, f"must start with {SCHEME!r}")
        body = raw[len(SCHEME) :]
        is_dir = body.endswith("/") or body in ("resources", "")
        parts = body.rstrip("/").split("/") if body.rstrip("/") else []
        if not parts:
            raise _invalid(raw, "missing scope: use ctx://resources/, ctx://user/<space>/ or ctx://agent/<space>/")
        scope = parts[0]
        if scope not in _SCOPES:
            raise _invalid(raw, f"unknown scope {scope!r}; expected one of {', '.join(_SCOPES)}")
        rest = parts[1:]
        space: str | None = None
        if scope != "resources":
            if not rest:
                raise _invalid(raw, f"ctx://{scope}/ needs a space: ctx://{scope}/<space>/...")
            space = validate_segment(rest[0], raw)
            rest = rest[1:]
            if not rest:
                is_dir = True
        segs = tuple(validate_segment(s, raw) for s in rest)
        if not segs and scope == "resources":
            is_dir = True
        return cls(scope=scope, space=space, segments=segs, is_dir=is_dir)  # type: ignore[arg-type]

    # ---- identity ---------------------------------------------------------------------------------------------
    @property
    def root(self) -> str:
        """The scope root including the space, with a trailing slash, e.g. ``ctx://user/alice/``."""
        return f"{SCHEME}{self.scope}/" if self.space is None else f"{SCHEME}{self.scope}/{self.space}/"

    def __str__(self) -> str:
        path = "/".join(self.segments)
        if not path:
            return self.root
        return self.root + path + ("/" if self.is_dir else "")

    @property
    def key(self) -> str:
        """Identity of the node, independent of the trailing slash (a file and a directory cannot share a path)."""
        return str(self).rstrip("/") if self.segments else self.root

    @property
    def name(self) -> str:
        """Last segment ('' for a scope or space root)."""
        return self.segments[-1] if self.segments else ""

    @property
    def parent(self) -> ContextURI | None:
        """The parent directory, or ``None`` for a scope/space root."""
        if not self.segments:
            return None
        return ContextURI(self.scope, self.space, self.segments[:-1], True)

    def ancestors(self) -> list[ContextURI]:
        """Parents from the nearest up to the scope/space root."""
        out: list[ContextURI] = []
        p = self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out

    def child(self, name: str, *, is_dir: bool = False) -> ContextURI:
        """The child ``name`` of this directory (validated)."""
        if not self.is_dir:
            raise _invalid(str(self), "a file has no children")
        return ContextURI(self.scope, self.space, (*self.segments, validate_segment(name, str(self))), is_dir)

    def as_dir(self) -> ContextURI:
        return ContextURI(self.scope, self.space, self.segments, True)

    def as_file(self) -> ContextURI:
        if not self.segments:
            raise _invalid(str(self), "a scope or space root is always a directory")
        return ContextURI(self.scope, self.space, self.segments, False)

    def is_within(self, other: ContextURI) -> bool:
        """True when this URI equals ``other`` or lies in its subtree."""
        return (
            self.scope == other.scope
            and self.space == other.space
            and self.segments[: len(other.segments)] == other.segments
        )

    # ---- derived attributes (DESIGN §1) ----------------------------------------------------------------------
    @property
    def owner_space(self) -> str:
        """``shared`` for resources, ``user:<space>`` or ``agent:<space>`` otherwise."""
        return "shared" if self.scope == "resources" else f"{self.scope}:{self.space}"

    @property
    def type_root_depth(self) -> int | None:
        """Number of segments that make up the context-type root (0 for resources), ``None`` if outside one."""
        if self.scope == "resources":
            return 0
        if self.segments and self.segments[0] == "memories":
            return 1
        if self.scope == "agent" and self.segments and self.segments[0] == "skills":
            return 1
        return None

    @property
    def context_type(self) -> ContextType | None:
        """``resource`` under ctx://resources/, ``memory`` under .../memories/, ``skill`` under ctx://agent/<s>/skills/.

        ``None`` for space roots and paths outside a type root, which can hold no content.
        """
        if self.scope == "resources":
            return "resource"
        if self.segments and self.segments[0] == "memories":
            return "memory"
        if self.scope == "agent" and self.segments and self.segments[0] == "skills":
            return "skill"
        return None

    @property
    def category(self) -> str | None:
        """First segment below the type root when it is a directory on the path, else ``None`` (DESIGN §1)."""
        depth = self.type_root_depth
        if depth is None:
            return None
        below = self.segments[depth:]
        if len(below) >= 2 or (len(below) == 1 and self.is_dir):
            return below[0]
        return None


def parse_uri(uri: str | ContextURI) -> ContextURI:
    """Accept a string or an already parsed URI."""
    return uri if isinstance(uri, ContextURI) else ContextURI.parse(uri)


ROOT_URIS = frozenset({SCHEME, SCHEME + "/"})
"""``ctx://`` (or ``ctx:///``) as a read tool's ``target_uri``: everything visible to the caller, never more."""


def parse_read_target(target_uri: str | None, field: str = "target_uri") -> ContextURI | None:
    """A read tool's ``target_uri`` (search_memory, lookup_knowledge, the similar route) parsed with the read code.

    Returns:
        ``None`` when there is no target: absent, empty, or the root ``ctx://`` (the caller's whole visible scope;
        tenancy still comes from the request context only); else the parsed URI (its visibility is the caller's
        check).

    Raises:
        ContextEngineError: ``RET-4001`` (a read code, never ``WRT-4001``) with ``details.field`` when malformed.
    """
    text = target_uri.strip() if isinstance(target_uri, str) else target_uri
    if target_uri is None or text == "" or text in ROOT_URIS:
        return None
    try:
        return ContextURI.parse(target_uri)
    except ContextEngineError as err:
        raise ContextEngineError(
            ErrorCode.QUERY_INVALID, f"{field} is not a valid URI: {err.message}", {"field": field}
        ) from err


@functools.lru_cache(maxsize=16_384)
def _parse_cached(uri: str) -> ContextURI:
    """:meth:`ContextURI.parse` of a string (ContextURI is immutable, so instances are shared; errors are not
    cached and raise each time)."""
    return ContextURI._parse(uri)
