"""Calendar dates a question names, as time windows (issue 25, the temporal category).

A question that names a date asks about what was said or done then: "What painting did Melanie show to Caroline on
October 13, 2023?", "What did the user do in mid-October 2024?", "用户2024年9月22日做了什么？". The messages written
on that date hold the answer (locomo_dev: 93 of the 106 questions naming a date have an evidence turn of that very
day or month), and a message carries its time (``occurred_at``). :func:`date_anchors` finds the dates; each
:class:`DateAnchor` gives its ``[start, end)`` windows in UTC; ``MemoryFilter.dated`` selects the memories in them,
and ``L0Retriever`` adds ``retrieval.seed.date_boost`` to their fused score (the best ``date_candidates`` of them
join the first round). locomo_dev R@10 0.7736 -> 0.7962, P@1 0.5005 -> 0.5196 (eval/README.md).

Only dates written out are read: a day with its month ("13 October", "Oct 13th, 2023", "2023-10-13", "10月13日"), a
month with its year ("July 2023", "mid-October 2024", "2023年7月"); a month's name capitalised, unless the
query writes no capital at all ("what did i do on oct 13"): "3 march tickets" names no date. A month alone
is read only after "in" or "during" and by its full name ("in June", "during early May"; not "may" the verb, nor
"confide in Jan"). Relative dates ("last week", "yesterday") are not read, since the question's "now" is unknown. A
date without a year stands for that day (a month alone for that month) in every year (:meth:`DateAnchor.windows` of
the years asked for). A date says when something was said: a question about an event planned for a date ("Which
distance did the user end up racing in May?") may find the messages of that month first, not the earlier ones
that planned it.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from context_engine.storage.keyword.content_words import content_tokens

__all__ = ["REPORTED_WITHIN_DAYS", "DateAnchor", "asks_only_the_date", "date_anchors"]

#: A day's window also holds the days after it in which what happened that day is told ("Yesterday I had my first
#: team offsite" on the 23rd, for "What did the user do on 22 September?"). One day: locomo_dev R@10 0.7917 (the day
#: alone) -> 0.7927, and the probe question above found; two: 0.7940.
REPORTED_WITHIN_DAYS = 1
# Times are stored in UTC and a question names a local date: a window reaches from the day's start in the
# easternmost zone (UTC+14) to its end in the westernmost (UTC-12), so "This morning ..." at 08:00 in Tokyo (23:00
# UTC the day before) is of the day it was said.
_EAST = timedelta(hours=14)
_WEST = timedelta(hours=12)

_MONTHS = {
    name: i for i in range(1, 13) for name in {calendar.month_name[i].casefold(), calendar.month_abbr[i].casefold()}
} | {"sept": 9}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=lambda m: (-len(m), m))) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_FULL_MONTHS = "|".join(calendar.month_name[i] for i in range(1, 13))
_PART = r"(?:(?P<part>early|mid|late)[- ]?)?"
_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"(?<![\w-]){_YEAR}-(?P<month_num>[01]\d)-(?P<day_num>[0-3]\d)(?=T\d|[^\w-]|$)",  # 2023-10-13(T09:00)
        rf"(?<![\w.]){_DAY}(?:\s+of)?\s+{_MONTH}(?:,?\s+{_YEAR})?(?!\w)",  # 13 October 2023, 1 February, 2023
        rf"(?<![\w.]){_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?(?![\w:])",  # October 13, 2023; Aug 15th
        rf"(?<!\w){_PART}{_MONTH},?\s+{_YEAR}(?!\w)",  # July 2023, mid-October 2024
        # a month alone after "in" / "during", its full name: in June, during early May (not "confide in Jan")
        rf"(?<!\w)(?:in|during)\s+{_PART}(?P<month>{_FULL_MONTHS})(?![\w'’-])",
        rf"{_YEAR}\s*年\s*(?P<month_num>1[0-2]|0?[1-9])\s*月(?:\s*(?P<day_num>[0-3]?\d)\s*[日号])?",  # 2024年9月22日
        r"(?<!\d)(?P<month_num>1[0-2]|0?[1-9])\s*月\s*(?P<day_num>[0-3]?\d)\s*[日号]",  # 9月22日
    )
)
# early / mid / late: days of the month (a window may overlap the next: "mid" is read generously)
_PARTS = {"early": (1, 11), "mid": (10, 22), "late": (20, 32)}


@dataclass(frozen=True, slots=True)
class DateAnchor:
    """A date a question names.

    Attributes:
        text: the date as written in the question.
        month: 1..12.
        day: the day of the month, ``None`` for a month ("July 2023").
        year: ``None`` when the question gives none ("Aug 15th").
        part: ``early``, ``mid`` or ``late`` for a part of a month ("mid-October 2024"), else ``None``.
    """

    text: str
    month: int
    day: int | None = None
    year: int | None = None
    part: str | None = None

    def windows(self, years: Iterable[int] = ()) -> list[tuple[datetime, datetime]]:
        """The ``[start, end)`` windows (UTC) of the anchor: its day and the :data:`REPORTED_WITHIN_DAYS` after it,
        its month or the part of its month, in its year, or in each of ``years`` when it has none (a day that a year
        lacks, 29 February, is skipped); each from the local start of its first day in UTC+14 to the local end of
        its last in UTC-12 (times are stored in UTC, a question names a local date)."""
        out: list[tuple[datetime, datetime]] = []
        for year in [self.year] if self.year is not None else sorted(set(years)):
            last = calendar.monthrange(year, self.month)[1]
            if self.day is not None:
                if self.day > last:
                    continue
                start = datetime(year, self.month, self.day, tzinfo=UTC)
                out.append((start - _EAST, start + timedelta(days=1 + REPORTED_WITHIN_DAYS) + _WEST))
                continue
            first, after = _PARTS.get(self.part or "", (1, last + 1))
            start = datetime(year, self.month, first, tzinfo=UTC)
            end = datetime(year, self.month, min(after, last + 1) - 1, tzinfo=UTC) + timedelta(days=1)
            out.append((start - _EAST, end + _WEST))
        return out


def date_anchors(query: str) -> list[DateAnchor]:
    """The calendar dates ``query`` names, in order of appearance (module docstring); ``[]`` when none.

    Examples: "What did Gina find on 1 February, 2023?" -> ``[DateAnchor("1 February, 2023", 2, 1, 2023)]``;
    "What did the user do in mid-October 2024?" -> ``[DateAnchor("mid-October 2024", 10, None, 2024, "mid")]``;
    "What may Caroline do?" -> ``[]``."""
    text = unicodedata.normalize("NFKC", query)
    found: list[tuple[int, int, DateAnchor]] = []
    cased = any(c.isupper() for c in text)
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e, _ in found):
                continue  # a date already read (the patterns go from the most to the least specific)
            anchor = _anchor(m, cased)
            if anchor is not None:
                found.append((m.start(), m.end(), anchor))
    return [a for _, _, a in sorted(found, key=lambda f: f[0])]


def _anchor(m: re.Match[str], cased: bool) -> DateAnchor | None:
    """The anchor of a pattern's match; ``None`` for a day no month has, or a month's name in lower case in a query
    that writes capitals ("3 march tickets", "5 mar")."""
    groups = m.groupdict()
    if groups.get("month") and cased and not groups["month"][0].isupper():
        return None
    month = int(groups["month_num"]) if groups.get("month_num") else _MONTHS[groups["month"].casefold()]
    day_text = groups.get("day_num") or groups.get("day")
    day = int(day_text) if day_text else None
    year = int(groups["year"]) if groups.get("year") else None
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return None  # "2023-13-01" is a build number, not a date
    return DateAnchor(m.group(0).strip(), month, day, year, (groups.get("part") or "").casefold() or None)


# What a question about a day asks besides the day ("What did the user do / say / talk about on ...?", 用户做了什么).
_EVENT_WORDS = tuple(
    """do does did doing done happen happens happened happening say says said tell told talk talks talked talking
    discuss discussed mention mentioned ask asked speak spoke write wrote go went going on up recap summarize
    summarise summary event events conversation conversations session sessions chat chats day user assistant we us
    our you your me my 做 做了 干 干了 发生 发生了 说 说了 聊 聊了 聊天 谈 谈了 讨论 提到 提起 对话 会话 事 事情
    那天 当天 这天 用户 助手 我 我们 你 你们 什么 哪些 啥""".split()
)


def asks_only_the_date(query: str, names: Iterable[str] = ()) -> bool:
    """Whether ``query`` names a date (:func:`date_anchors`) and asks nothing else: what someone did, said or talked
    about then ("What did the user talk about on 22 September?", "What did Caroline do on 8 May 2023?",
    "9月22日我们讨论了什么？"). Its answer is whatever that day holds, so no topic is there to match
    (``match_quality``). Not content: the date, ``names`` (the speakers of the messages found), function words and
    the words of such a question (do, happen, say, talk, discuss, ask, the roles, we / you). Any other word is a
    topic: "What did the user do with Bob / in Paris / enjoy on 22 September?" asks more than the day."""
    anchors = date_anchors(query)
    if not anchors:
        return False
    text = unicodedata.normalize("NFKC", query)
    for anchor in anchors:
        text = text.replace(anchor.text, " ")
    return not content_tokens(text, [*names, *_EVENT_WORDS], phatic=False)
