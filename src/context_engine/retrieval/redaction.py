"""Secret redaction of text returned to callers (DESIGN.md §6; seed 000 §9 "L2 返回前执行敏感字段裁剪").

Two layers, applied in this order:

1. Our patterns (:data:`PATTERNS`), fast and aimed at free text: PEM private keys (a block without its END line is
   redacted to the end of the text, so an excerpt cut inside a key leaks nothing), credentials in connection strings
   (``scheme://user:password@host``), ``key=value`` / ``key: value`` assignments of passwords, secrets, tokens, API
   keys (also Chinese 密码/口令/密钥), bearer tokens, JWTs, and well-known token formats (AWS, GitHub, GitLab, Slack,
   OpenAI, Google, Stripe, npm, PyPI).
2. The maintained ``detect-secrets`` plugins (1.5.0), line by line, for whatever their detectors know beyond our
   list. The noisy generic ones are left out: ``HexHighEntropyString`` (digests and commit ids in runbooks) and
   ``IPPublicDetector`` (addresses are not secrets here).

Each secret becomes ``[REDACTED:<kind>]``. :meth:`Redactor.redact` on search abstracts uses the patterns only (they
run in microseconds); reads of L1/L2 use both layers. If the library fails, the patterns' result is returned and
``RET-5005`` is counted (``retrieval.fallback.count``) and logged: redaction degrades, it never switches off.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from context_engine.errors import ErrorCode
from context_engine.observability.metrics import Metrics
from context_engine.settings import RedactionSettings

__all__ = ["PATTERNS", "Redaction", "Redactor"]

_LOG = logging.getLogger(__name__)

_KEY_WORDS = (
    r"password|passwd|pwd|pass|secret|client[_-]?secret|secret[_-]?key|token|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|密码|口令|密钥|令牌"
)

#: ``(kind, compiled pattern, group)``: the group (0 = the whole match) is what gets replaced.
PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)"
        ),
        0,
    ),
    ("connection_string", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@"), 1),
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
    (
        "credential",
        re.compile(
            r"(?i)(?:\b|(?<=[_\-])|(?=[\u4e00-\u9fff]))(?:[A-Za-z0-9_\-]*(?:" + _KEY_WORDS + r"))"
            r"[\"']?\s*(?:[:=：]|=>|\bis\b|为|是)\s*(\"[^\"\n]{3,}\"|'[^'\n]{3,}'|[^\s,;\"'`<>{}()\[\]]{3,})"
        ),
        1,
    ),
]

#: A case-insensitive superset of what any pattern can match: text without any of these needs no pattern pass.
_TRIGGER = re.compile(
    r"PRIVATE KEY|://|eyJ|A[KS]IA|AGPA|AIDA|AROA|ANPA|ANVA|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|sk-|"
    r"_live_|_test_|AIza|npm_|pypi-|bearer|" + _KEY_WORDS,
    re.IGNORECASE,
)
# Short texts (abstracts) redacted by patterns only are memoised: they repeat across searches.
_CACHE_MAX_CHARS = 1024
_CACHE_SIZE = 8192

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
        self._patterns_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(self._patterns_cached)  # type: ignore[method-assign]

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
        out = self._patterns(text)
        if library and self._settings.detect_secrets:
            self._library(out)
        return out

    def _patterns(self, text: str) -> Redaction:
        out = Redaction(text)
        if _TRIGGER.search(text) is None:
            return out
        for kind, pattern, group in PATTERNS:
            out.text = pattern.sub(lambda m, k=kind, g=group: self._replace(m, k, g, out), out.text)
        return out

    def _patterns_cached(self, text: str) -> tuple[str, int, tuple[str, ...]]:
        out = self._patterns(text)
        return out.text, out.count, tuple(out.kinds)

    @staticmethod
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

    def _load_plugins(self) -> list[Any]:
        if self._plugins is None:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

            plugins = []
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
                values: set[str] = set()
                kinds: list[str] = []
                for plugin in plugins:
                    # A YAML file name selects the detectors' most permissive "key: value" grammar.
                    for secret in plugin.analyze_line(filename="content.yaml", line=line, line_number=number):
                        value = secret.secret_value or ""
                        if len(value) >= _MIN_LIBRARY_SECRET and "[REDACTED" not in value:
                            values.add(value)
                            kinds.append(secret.type)
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
            _LOG.warning("secret-detection library failed (%s); returned text is redacted by patterns only", err)
            if self._metrics is not None:
                self._metrics.fallbacks.labels(code=ErrorCode.REDACTION_DEGRADED.value).inc()
