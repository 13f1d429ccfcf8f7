"""Secret redaction: the one function every surface that returns or stores text goes through (DESIGN.md §6;
seed 000 §9 "L2 返回前执行敏感字段裁剪"; docs/security.md "Secret redaction").

Two layers, applied in this order:

1. Our patterns (:data:`PATTERNS`), fast and aimed at free text: PEM private keys (a block without its END line is
   redacted to the end of the text, so an excerpt cut inside a key leaks nothing), credentials in URLs and connection
   strings (``scheme://user:password@host``, ``redis://:password@host``, a long token as the whole userinfo, Azure
   ``AccountKey=``/``SharedAccessKey=``/``sig=``), ``key=value`` / ``key: value`` assignments of passwords, secrets,
   tokens, API keys on one line (also Chinese 密码/口令/密钥; in prose, "the password is X", X must hold a digit),
   bearer and basic ``Authorization`` headers, JWTs, and well-known token formats (AWS, GitHub, GitLab, Slack tokens and
   webhooks, OpenAI, Google API keys and OAuth client secrets, Stripe, SendGrid, Twilio, Mailgun, DigitalOcean,
   Shopify, npm, PyPI).
2. The maintained ``detect-secrets`` plugins (1.5.0), line by line, for whatever their detectors know beyond our
   list. The noisy generic ones are left out: ``HexHighEntropyString`` (digests and commit ids in runbooks) and
   ``IPPublicDetector`` (addresses are not secrets here).

Each secret becomes ``[REDACTED:<kind>]``. Where it is called:

* write time, for stored derived text: :func:`redact_derived` on L0 abstracts, L1 overviews and titles
  (``ingest.pipeline``), memory slugs (:func:`slug_text`), and :meth:`Redactor.redact_value` on every string of a
  ``tool_invocation`` row (``knowledge.tool_invocation_recorder``);
* read time, for content: :meth:`Redactor.redact` on L1/L2 reads and on lookup_knowledge evidence excerpts and context
  packs (both layers), on search abstracts and audit rows read back (patterns);
* log lines: :func:`redact_log_event` in the log formatter (patterns);
* every answer that leaves an interface: :func:`redact_output` on each HTTP JSON body (the app's default response
  class and the error envelopes), each MCP tool result and each console fragment's values (patterns). The calls
  above decide what a field holds; this last pass makes sure that no field, including one added later (a
  breadcrumb, a URI segment, a metadata value, a speaker name), returns a secret the patterns know.

If the library fails, the patterns' result is returned and ``RET-5005`` is counted (``retrieval.fallback.count``) and
logged: redaction degrades, it never switches off.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from context_engine.errors import ErrorCode

if TYPE_CHECKING:  # types only: the log formatter imports this module, which must stay light
    from context_engine.observability.metrics import Metrics
    from context_engine.settings import RedactionSettings

__all__ = [
    "PATTERNS",
    "Redaction",
    "Redactor",
    "redact_derived",
    "redact_log_event",
    "redact_output",
    "redact_patterns",
    "redact_structure",
    "slug_text",
]

_LOG = logging.getLogger(__name__)

_KEY_WORDS = (
    r"password|passwd|pwd|pass|passphrase|secret|client[ _-]?secret|secret(?:[ _-]?access)?[ _-]?key|token|"
    r"access[ _-]?token|auth[ _-]?token|refresh[ _-]?token|api[ _-]?key|apikey|access[ _-]?key|private[ _-]?key|"
    r"credentials?|密码|口令|密钥|令牌"
)
#: What may stand between a label and its separator: ``AWS Secret Access Key [None]:``, ``Password for admin:``.
_LABEL_TAIL = r"(?:[ \t]+\[[^\]\n]{0,20}\]|[ \t]+for[ \t]+[\w.@\-]{1,40})?"
_VALUE_STOP = r"[^\s,;\"'`<>{}()\[\]]"

#: ``(kind, compiled pattern, group)``: the group (0 = the whole match) is what gets replaced.
PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)"
        ),
        0,
    ),
    # scheme://user:password@ and scheme://:password@ (redis); the user name is kept, the password goes
    ("connection_string", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:([^\s@/]+)@"), 1),
    # a long token as the whole userinfo: https://<token>@host
    ("url_token", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://((?=[^\s:/@]*\d)(?=[^\s:/@]*[A-Za-z])[^\s:/@]{20,})@"), 1),
    ("azure_key", re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|sig)=([^;&\s\"']{8,})"), 1),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}"), 0),
    ("basic_auth", re.compile(r"(?i)\bbasic\s+([A-Za-z0-9+/]{12,}={0,2})"), 1),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), 0),
    ("twilio_key", re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"), 0),
    ("mailgun_key", re.compile(r"\bkey-[0-9a-z]{32}\b"), 0),
    ("digitalocean_token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b"), 0),
    ("shopify_token", re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"), 0),
    ("google_oauth_secret", re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16}\b"), 0),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b"), 0),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"), 0),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), 0),
    ("openai_key", re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{20,}\b"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), 0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), 0),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("pypi_token", re.compile(r"\bpypi-[A-Za-z0-9_\-]{50,}\b"), 0),
    ("bearer_token", re.compile(r"(?i)\b(?:bearer|token)\s+([A-Za-z0-9\-._~+/]{16,}=*)"), 1),
    # secrets on command lines: curl -u user:pass, mysql -pPASS, docker login -p PASS / --password PASS
    ("cli_password", re.compile(r"(?i)\bcurl\b[^\n]*?\s(?:-u|--user)[ \t]+[^\s:]+:(?!\$)(\S{3,})"), 1),
    ("cli_password", re.compile(r"(?i)\bmysql(?:dump|admin)?\b[^\n]*?\s-p(?![\s$])(\S{3,})"), 1),
    ("cli_password", re.compile(r"(?i)\blogin\b[^\n]*?\s(?:-p|--password)(?:[ \t]+|=)(?![-$])(\S{3,})"), 1),
    # a cookie's value: Cookie: session=X
    ("cookie", re.compile(r"(?i)\bcookie:[ \t]*[^=\s;]+=([^;\s]{8,})"), 1),
    # <password>X</password> and the like in XML configs
    ("credential", re.compile(r"(?i)<(?:password|passwd|secret|token|api[_-]?key)>([^<\n]{3,})</"), 1),
    # key: value, key = value, key => value (on one line)
    (
        "credential",
        re.compile(
            r"(?i)(?:\b|(?<=[_\-])|(?=[\u4e00-\u9fff]))(?:[A-Za-z0-9_\-]*(?:" + _KEY_WORDS + r"))"
            r"[\"']?" + _LABEL_TAIL + r"[ \t]*(?:[:=：]|=>)[ \t]*"
            r"(\"[^\"\n]{3,}\"|'[^'\n]{3,}'|" + _VALUE_STOP + r"{3,})"
        ),
        1,
    ),
    # a label right before a key-shaped value: "the aws secret access key wJalr...": 16+ characters, letters
    # and digits, so "the api key rotation" stays as written
    (
        "credential",
        re.compile(
            r"(?i)(?:\b|(?<=[_\-]))(?:secret(?:[ _-]?access)?[ _-]?key|api[ _-]?key|access[ _-]?token|"
            r"auth[ _-]?token|client[ _-]?secret)[ \t]+((?=[A-Za-z0-9/+=_\-]*\d)(?=[A-Za-z0-9/+=_\-]*[A-Za-z])"
            r"[A-Za-z0-9/+=_\-]{16,})"
        ),
        1,
    ),
    # prose: "the password is X", "密码是X": X must hold a digit, so "the token is invalid" stays as written
    (
        "credential",
        re.compile(
            r"(?i)(?:\b|(?<=[_\-])|(?=[\u4e00-\u9fff]))(?:[A-Za-z0-9_\-]*(?:" + _KEY_WORDS + r"))"
            r"[ \t]*(?:\bis\b|为|是)[ \t]*((?=[^\s,;\"'`<>{}()\[\]]*\d)[^\s,;\"'`<>{}()\[\]]{3,})"
        ),
        1,
    ),
]

#: A case-insensitive superset of what any pattern can match: text without any of these needs no pattern pass. A
#: scheme separator counts only with an ``@`` after it before any whitespace or ``/`` (the URL patterns need
#: userinfo, which holds neither; the Slack webhook has its own branch), so the URIs every search answer and audit row
#: hold (``ctx://...``, ``https://...``) skip the pass: it was most of the cost of redacting a search's audit row
#: (1.2 -> 0.4 ms, bench/search_memory.py rows). Stopping at ``/`` also keeps the search linear: ``://[^\s]*@``
#: rescanned to the end of a run of URIs without whitespace for each ``://`` in it (16 s for 469k characters of
#: minified JSON links; 40 ms now), a review found.
_TRIGGER = re.compile(
    r"PRIVATE KEY|://[^\s/@]*@|hooks\.slack\.com|eyJ|A[KS]IA|AGPA|AIDA|AROA|ANPA|ANVA|gh[pousr]_|github_pat_|glpat-|"
    r"xox[abposr]-|sk-|"
    r"_live_|_test_|AIza|npm_|pypi-|bearer|basic\s|AccountKey|SharedAccessKey|sig=|SG\.|(?:SK|AC)[0-9a-f]{32}|"
    r"key-[0-9a-z]{32}|do[opr]_v1_|shp(?:at|ca|pa|ss)_|GOCSPX-|cookie|curl|mysql|login|" + _KEY_WORDS,
    re.IGNORECASE,
)
#: :data:`_TRIGGER` for an ASCII text, searched in its lower-cased form with every branch in lower case: ~5x faster
#: than re.IGNORECASE over the 40 branches (11 against 54 us for a 127-character abstract), and a search result's
#: first-seen abstract pays it (the pass is memoised per text). Only for ASCII: re.IGNORECASE also matches letters
#: that ``str.lower`` does not map to ASCII ("paſſword", U+017F), which such text cannot hold.
_TRIGGER_ASCII = re.compile(_TRIGGER.pattern.lower())
# Short texts (abstracts) redacted by patterns only are memoised: they repeat across searches.
_CACHE_MAX_CHARS = 1024
_CACHE_SIZE = 8192
_FULL_CACHE_MAX_CHARS = 16_384
_FULL_CACHE_SIZE = 512

# detect-secrets plugins that mostly flag non-secrets in operations text.
_SKIPPED_PLUGINS = frozenset({"HexHighEntropyString", "IPPublicDetector"})
# Detected values shorter than this are partial matches (e.g. the prefix 'ghp'); our patterns cover their formats.
_MIN_LIBRARY_SECRET = 6
# Values our assignment pattern must not take for a secret (placeholders, booleans, prose).
_NOT_SECRETS = frozenset(
    {"true", "false", "null", "none", "required", "optional", "redacted", "changeme", "example", "the", "not", "set"}
)


@dataclass
class Redaction:
    """The redacted text, how many secrets were replaced and of which kinds."""

    text: str
    count: int = 0
    kinds: list[str] = field(default_factory=list)


class Redactor:
    """Replaces secrets with ``[REDACTED:<kind>]`` (see the module docstring).

    Args:
        settings: the ``retrieval.redaction`` section.
        metrics: counts ``RET-5005`` when the library fails (``None``: not counted).
    """

    def __init__(self, settings: RedactionSettings, metrics: Metrics | None = None) -> None:
        self._settings = settings
        self._metrics = metrics
        self._plugins: list[Any] | None = None
        self._failures = 0
        # evidence excerpts and L1/L2 reads repeat across calls: both layers' results memoised per redactor
        self._full_cached = functools.lru_cache(maxsize=_FULL_CACHE_SIZE)(self._full)

    def redact(self, text: str, *, library: bool = True) -> Redaction:
        """Redact ``text``.

        Args:
            text: any text (markdown, plain).
            library: also run the detect-secrets plugins (slower: about 1 ms per KB); ``False`` for short texts on
                the search path, where the patterns suffice.

        Returns:
            The redacted text with counts. Never raises for ordinary text.
        """
        if not self._settings.enabled or not text:
            return Redaction(text)
        if not library and len(text) <= _CACHE_MAX_CHARS:
            redacted, count, kinds = self._patterns_cached(text)
            return Redaction(redacted, count, list(kinds))
        if library and self._settings.detect_secrets and len(text) <= _FULL_CACHE_MAX_CHARS:
            failures = self._failures
            redacted, count, kinds = self._full_cached(text)
            if self._failures != failures:  # a degraded result is not kept: the next call tries the library again
                self._full_cached.cache_clear()
            return Redaction(redacted, count, list(kinds))
        out = self._patterns(text)
        if library and self._settings.detect_secrets:
            self._library(out)
        return out

    def _full(self, text: str) -> tuple[str, int, tuple[str, ...]]:
        out = self._patterns(text)
        self._library(out)
        return out.text, out.count, tuple(out.kinds)

    def redact_value(self, value: Any) -> Any:
        """``value`` with every string inside it (dict values, list items, recursively) redacted by the patterns.

        For structured records that are stored or returned whole (``tool_invocation`` rows). Returns a new object
        for containers; other values are returned as they are.
        """
        if not self._settings.enabled:
            return value
        return redact_structure(value)

    def _patterns(self, text: str) -> Redaction:
        return _pattern_pass(text)

    def _patterns_cached(self, text: str) -> tuple[str, int, tuple[str, ...]]:
        return _patterns_cached(text)

    def _load_plugins(self) -> list[Any]:
        if self._plugins is None:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

            plugins: list[Any] = []
            cls: Any
            for cls in get_mapping_from_secret_type_to_class().values():
                if cls.__name__ not in _SKIPPED_PLUGINS:
                    plugins.append(cls())
            self._plugins = plugins
        return self._plugins

    def _library(self, out: Redaction) -> None:
        try:
            plugins = self._load_plugins()
            lines = out.text.split("\n")
            for number, line in enumerate(lines):
                if not line.strip() or "[REDACTED:" in line and len(line) < 40:
                    continue
                values, kinds = _line_secrets(plugins, line, number)
                for value in sorted(values, key=len, reverse=True):
                    if value in line:
                        line = line.replace(value, "[REDACTED:secret]")
                        out.count += 1
                if values:
                    lines[number] = line
                    for kind in kinds:
                        label = "detect_secrets:" + kind
                        if label not in out.kinds:
                            out.kinds.append(label)
            out.text = "\n".join(lines)
        except Exception as err:  # noqa: BLE001 - degrade to the patterns' result, counted and logged (RET-5005)
            self._failures += 1
            _LOG.warning("secret-detection library failed (%s); returned text is redacted by patterns only", err)
            if self._metrics is not None:
                self._metrics.fallbacks.labels(code=ErrorCode.REDACTION_DEGRADED.value).inc()


# ---- module-level helpers -----------------------------------------------------------------------------------------
def _line_secrets(plugins: list[Any], line: str, number: int) -> tuple[set[str], list[str]]:
    """The secret values the detect-secrets plugins find in one line (long enough, not a redaction mark already)
    and their types, one per finding."""
    values: set[str] = set()
    kinds: list[str] = []
    for plugin in plugins:
        # A YAML file name selects the detectors' most permissive "key: value" grammar.
        for secret in plugin.analyze_line(filename="content.yaml", line=line, line_number=number):
            value = secret.secret_value or ""
            if len(value) >= _MIN_LIBRARY_SECRET and "[REDACTED" not in value:
                values.add(value)
                kinds.append(secret.type)
    return values, kinds


_MARK_RE = re.compile(r"\[REDACTED:[^\]\s]*\]")


def _replace(match: re.Match[str], kind: str, group: int, out: Redaction) -> str:
    value = match.group(group)
    if group and (not value or value.strip("\"'").lower() in _NOT_SECRETS or value.startswith("[REDACTED")):
        return match.group(0)
    out.count += 1
    if kind not in out.kinds:
        out.kinds.append(kind)
    if group == 0:
        return f"[REDACTED:{kind}]"
    start, end = match.span(group)
    base = match.start(0)
    whole = match.group(0)
    return whole[: start - base] + f"[REDACTED:{kind}]" + whole[end - base :]


def _pattern_pass(text: str) -> Redaction:
    out = Redaction(text)
    trigger = _TRIGGER_ASCII.search(text.lower()) if text.isascii() else _TRIGGER.search(text)
    if trigger is None:
        return out
    for kind, pattern, group in PATTERNS:
        out.text = pattern.sub(functools.partial(_replace, kind=kind, group=group, out=out), out.text)
    return out


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _patterns_cached(text: str) -> tuple[str, int, tuple[str, ...]]:
    out = _pattern_pass(text)
    return out.text, out.count, tuple(out.kinds)


def redact_patterns(text: str) -> str:
    """``text`` with the secrets our patterns know replaced (layer 1 only: microseconds, no settings needed)."""
    if not text:
        return text
    if len(text) <= _CACHE_MAX_CHARS:
        return _patterns_cached(text)[0]
    return _pattern_pass(text).text


def redact_structure(value: Any) -> Any:
    """``value`` with every string inside it (dict values, list and tuple items, recursively) redacted by the
    patterns, always (write time: stored rows). Containers come back as new dicts and lists; other values as given."""
    if isinstance(value, str):
        return redact_patterns(value)
    if isinstance(value, dict):
        return {k: redact_structure(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_structure(v) for v in value]
    return value


@functools.lru_cache(maxsize=_FULL_CACHE_SIZE)
def _long_patterns_cached(text: str) -> str:
    # L2 excerpts and evidence texts repeat across reads: a pattern pass over 12k characters costs milliseconds
    return _pattern_pass(text).text


def redact_output(value: Any) -> Any:
    """``value`` with every string inside it redacted by the patterns: the last pass over an interface's answer.

    Walks pydantic models (field by field, through :meth:`~pydantic.BaseModel.model_copy`), dicts (keys and values),
    lists and tuples, recursively; other values come back as given, and so does any container or model in which
    nothing changed (no copy). Identifiers are not exempt: a URI whose path segment holds a secret comes back with
    the secret replaced, which no longer names the node (docs/security.md "Secret redaction").

    A text already redacted is left as it is (a ``[REDACTED:kind]`` mark is never redacted again), so a quote of a
    redacted excerpt still verifies. Microseconds for texts without a trigger word; short texts are memoised.
    """
    if isinstance(value, str):
        long = _CACHE_MAX_CHARS < len(value) <= _FULL_CACHE_MAX_CHARS
        redacted = _long_patterns_cached(value) if long else redact_patterns(value)
        return value if redacted == value else redacted
    if isinstance(value, dict):
        out = {redact_output(k): redact_output(v) for k, v in value.items()}
        same = len(out) == len(value) and all(k in value and value[k] is v for k, v in out.items())
        return value if same else out
    if isinstance(value, list | tuple):
        items = [redact_output(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    fields = getattr(type(value), "__pydantic_fields__", None)
    if fields is not None and hasattr(value, "model_copy"):
        update = {}
        stored = getattr(value, "__dict__", {})  # read as stored: a deprecated field's getter warns (schema/renames)
        for name in fields:
            old = stored[name] if name in stored else getattr(value, name, None)
            new = redact_output(old)
            if new is not old:
                update[name] = new
        return value.model_copy(update=update) if update else value
    return value


_DERIVED: Redactor | None = None


def redact_derived(text: str, *, library: bool = True) -> str:
    """Write-time redaction of stored derived text (L0 abstracts, L1 overviews, titles, slugs), always on.

    Stored text cannot be redacted later by a setting, so this ignores ``retrieval.redaction.enabled``; the library
    layer degrades to the patterns as :meth:`Redactor.redact` does.

    Args:
        text: the derived text.
        library: also run detect-secrets (about 1 ms per KB): on for short texts (L0 ≤ 256 characters, slugs);
            L1 overviews take the patterns only at write time, since every L1 read runs both layers again.
    """
    global _DERIVED
    if not text:
        return text
    if _DERIVED is None:
        from context_engine.settings import RedactionSettings

        _DERIVED = Redactor(RedactionSettings())
    return _DERIVED.redact(text, library=library).text


def slug_text(text: str) -> str:
    """``text`` fit to derive a URI slug from: secrets removed entirely (not even their ``[REDACTED:kind]`` mark)."""
    return _MARK_RE.sub(" ", redact_derived(text))


def redact_log_event(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """structlog processor: every string of a log event (the message, fields, a formatted traceback) redacted by
    the patterns, so no secret from a document, query or error reaches a log line."""
    return {k: redact_structure(v) for k, v in event_dict.items()}
