"""The specifics of a memory: the tokens that make two similar sentences two different facts (issue 11; dedup).

``add_memories`` drops a new memory as a near-duplicate when the cosine of the abstracts passes
``memory.near_duplicate_similarity`` (0.92). An embedding barely moves when one identifier, number or name changes:
with the default model "The parts were bundled under XJ-4477 last week" and "... XJ-4488 ..." score 0.94, so the
second fact was lost. The cosine says "the same kind of sentence"; :func:`same_specifics` says "about the same
things", and a near-duplicate needs both.

What counts as a specific (compared after NFKC and case-folding):

* a number with its unit: ``5 mg``, ``10 km``, ``7 pm`` (``7pm``, ``7 a.m.``), ``15%`` (``15 percent``), ``-18°c``,
  ``5′`` / ``5″`` (``5'`` / ``5"``: feet, inches), ``3 days``, ``1200 euros`` (= ``€1200``), ``$120``, ``5 million``:
  units of measure, time and data, currency words, codes and signs, each with its spellings (``5 mg`` =
  ``5 milligrams``, ``$50`` = ``50 dollars`` = ``50 usd``). Digits are compared as written but for the separators:
  ``1,000`` / ``1.000`` / ``1000`` are one number, ``3,5`` / ``3.5`` one decimal, and only an amount of money drops
  an all-zero fraction (``$120.00`` = ``$120``); ``4.10`` is not ``4.1`` (a version, or a precision), ``1.50 kg`` not
  ``1.5 kg``. ``12th`` is ``12``; number words count as digits (``four`` = ``4``, ``third`` = ``3``, ``half``;
  ``one`` only before a unit: it is also a pronoun), ``once`` / ``twice`` / ``thrice`` as ``1`` / ``2`` / ``3 times``;
* other tokens with a digit, as written: times, dates, versions, IP addresses, identifiers (``10:30``,
  ``2024-05-12``, ``v2.3.1``, ``192.168.0.12``, ``INC-12``, ``db-prod-3``);
* identifiers without digits: internal ``- _ . / : @ + #`` (``db-prod``, ``foo@bar.com``, ``config.yaml``), URLs;
* month and weekday names (``may`` and ``march`` only capitalised: they are also a verb);
* relative times, times of day and periods: ``today``, ``tomorrow``, ``yesterday``, ``tonight``, ``morning`` ...
  ``night``, ``noon``, ``weekend``, ``hour``, ``day``, ``week`` ... ``century``, ``ago``; ``daily`` / ``weekly`` ...
  as ``day`` / ``week`` ("every day"); with a ``this``, ``next`` (``coming``) or ``last`` (``past``, ``previous``)
  before it, that word too (``next week``, ``last Monday``); frequencies (``always``, ``usually``, ``often``,
  ``sometimes``, ``rarely``, with their synonyms);
* names: capitalised words (``Alice``, ``Lisbon``), mixed case (``iPhone``, ``GitHub``), acronyms (``AWS``), except a
  short list of function words (``I``, ``The``, ``In`` ...). A capitalised word that starts a sentence is only a name
  if neither text uses it in lower case: so "Bob likes green tea" / "Alice likes green tea" differ, while "The user
  prefers dark mode" / "User prefers ..." and "Really, Bob likes tea" / "Bob really likes tea" do not;
* in CJK text (no case, no spaces): the digits and Latin identifiers inside it (``我的航班是CA1234``), runs of CJK
  numerals (``周三`` / ``周四``; a lone ``一`` is not counted: it is in too many common words) and relative times
  (``下周`` / ``上周``, ``明天``, ``每周``).

The specifics must be the same and, within each kind (names, numbers with one unit, clock times, identifiers,
calendar names, relative times ...), in the same order of first occurrence: "Alice owes Bob $50" / "Bob owes Alice
$50" and "from Monday to Friday" / "from Friday to Monday" differ, while a reworded sentence that moves a phrase keeps
each kind's order ("I moved to Lisbon in March" / "In March I moved to Lisbon": names ``lisbon``, months ``march``).

And the polarity must be the same: as many negations (``not``, ``never``, ``no``, ``n't``, ``nothing``, ``without``
...; ``不``, ``没``, ``未``, ``别``; and the verbs of aversion or refusal ``hate``, ``dislike``, ``loathe``, ``detest``,
``despise``, ``disagree``, ``disapprove``, ``refuse``, ``reject``, ``distrust``: "I love cilantro" / "I hate
cilantro"), and no negation moved to other words: a text is cut into clauses (at punctuation, at ``but``, ``while``,
``although`` ..., and at ``and``/``or`` before a subject pronoun); the content words after a negation in a clause are
negated, those of a clause without one affirmed. Two texts differ when one negates a word the other only affirms
*and* affirms a word the other only negates: "I like tea but I don't like coffee" / "I like coffee but I don't like
tea". "I am allergic to shellfish" / "I am not allergic to shellfish" (cosine 0.96) are two facts, "I don't drink
coffee any more" / "I no longer drink coffee" and "After dinner, I never drink coffee" / "I never drink coffee after
dinner" one.

The rule errs towards "different": "Alice met Bob" / "Bob met Alice", "2 cats and 3 dogs" / "3 dogs and 2 cats", "a
day" / "one day" or a dropped "usually" make two texts different, and the cost is a redundant memory, never a lost
one. Pure functions, no model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Specifics", "distinguishing_tokens", "is_code", "same_specifics", "specifics"]

# Han, kana, Hangul, CJK symbols: no case and no spaces, so never part of a Latin token.
_CJK = "\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff"
_ALNUM = rf"[^\W_{_CJK}]"  # a letter or digit of a cased (or uncased, non-CJK) script
_WORD = rf"{_ALNUM}+(?:'{_ALNUM}+)*"
_TOKEN = re.compile(
    rf"""
    (?P<url>\b[a-z][a-z0-9+.-]*://[^\s<>"'{_CJK}]+)
  | (?P<cur>[$€£¥₹₩])?
    (?P<sign>(?<!{_ALNUM})[-+](?=\d))?
    (?P<word>{_WORD}(?:(?:[-_./:@+#]|(?<=\d),(?=\d)){_WORD})*)
    """,
    re.VERBOSE | re.IGNORECASE,
)
# 不喝, 没有, 未曾, 别: a 不 inside a word (不错) only errs towards "different"
_CJK_NEGATION = re.compile(r"[不没未别]")
_CJK_NUMERALS = re.compile(r"[〇零一二三四五六七八九十百千万萬亿億两兩]+")
#: Relative dates, times of day and frequencies in Chinese and Japanese (下周 / 上周, 明天 / 今天, 每周 / 每月).
_CJK_TIME = re.compile(
    "上个月|下个月|这个月|今天|明天|昨天|后天|前天|今晚|明晚|昨晚|今早|上周|下周|本周|这周|上月|下月|本月|去年|今年|明年"
    "|每天|每周|每月|每年|每晚|早上|上午|中午|下午|晚上|今日|明日|昨日|今夜|今朝|先週|来週|今週|毎週|毎日|毎月|毎年"
    "|先月|来月|今月|来年|昨年|午前|午後"
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)", re.IGNORECASE)
_CLOCK = re.compile(r"\d{1,2}(?::\d{2}){1,2}")
_ATTACHED = re.compile(r"(\d[\d.,:]*)-?([^\W\d_]+)")  # 7pm, 5mg, 10-km, 1.5GB
_CONNECTORS = frozenset("-_./:@+#")
_URL_TAIL = ".,;:!?)]}>'\""
_LEAD_IN = " \t\r\n\"'“‘«([{*•·-–—>#"  # what may stand between a sentence end and its first word
_SENTENCE_END = frozenset(".!?:;…。！？\n")
_LOOKBACK = 32  # characters looked back for a sentence end

_NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
} | {w: str(10 * n) for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}
_NUMBER_WORDS |= {
    w: str(n)
    for n, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(), start=1
    )
} | {"half": "0.5"}
_TIMES_WORDS = {"once": "1", "twice": "2", "thrice": "3"}  # "once a week" is "1 time a week"
_SCALE_WORDS = frozenset({"hundred", "thousand", "million", "billion", "trillion", "dozen"})

#: Units of measure, currencies and the time of day, each canonical form with its spellings (case-folded); a
#: spelling of three or more letters stands for its plural too ("5 mg" = "5 milligrams", "1200 dollars" = "$1200").
# fmt: off
_UNIT_SPELLINGS = {
    "mg": "mg milligram milligramme", "g": "g gram gramme", "kg": "kg kilo kilogram kilogramme",
    "μg": "μg mcg microgram", "lb": "lb lbs pound", "oz": "oz ounce", "t": "tonne ton",
    "mm": "mm millimetre millimeter", "cm": "cm centimetre centimeter", "m": "m metre meter",
    "km": "km kilometre kilometer", "in": "inch inches", "ft": "ft foot feet", "yd": "yd yard", "mi": "mi mile",
    "ml": "ml millilitre milliliter", "cl": "cl", "l": "l litre liter", "gal": "gal gallon", "pint": "pint",
    "cup": "cup", "tbsp": "tbsp tablespoon", "tsp": "tsp teaspoon", "acre": "acre", "ha": "ha hectare",
    "ms": "ms millisecond", "s": "s sec second", "min": "min minute", "h": "h hr hrs hour", "day": "day",
    "night": "night", "week": "wk week", "fortnight": "fortnight", "month": "month", "year": "yr yrs year",
    "decade": "decade", "century": "century centuries", "time": "time",
    "b": "byte", "kb": "kb kilobyte", "mb": "mb megabyte", "gb": "gb gigabyte", "tb": "tb terabyte", "kib": "kib",
    "mib": "mib", "gib": "gib", "bit": "bit", "kbps": "kbps", "mbps": "mbps", "gbps": "gbps",
    "hz": "hz hertz", "khz": "khz", "mhz": "mhz", "ghz": "ghz", "rpm": "rpm", "mph": "mph", "km/h": "km/h kph",
    "w": "w watt", "kw": "kw kilowatt", "kwh": "kwh", "v": "v volt", "mah": "mah", "kcal": "kcal", "cal": "cal calorie",
    "°": "° deg degree", "°c": "°c", "°f": "°f", "%": "% percent pct", "am": "am", "pm": "pm",
    "$": "$ dollar usd buck", "€": "€ euro eur", "£": "£ gbp sterling", "¥": "¥ yen jpy", "yuan": "yuan cny rmb",
    "₹": "₹ rupee inr", "₩": "₩ krw", "chf": "chf franc", "cad": "cad", "aud": "aud", "¢": "¢ cent",
    "btc": "btc bitcoin",
}
# fmt: on
_UNITS = {
    form: unit
    for unit, spellings in _UNIT_SPELLINGS.items()
    for spelling in spellings.split()
    for form in (spelling, spelling + ("es" if spelling.endswith(("ch", "s", "x")) else "s"))
    if form == spelling or (spelling.isalpha() and len(spelling) >= 3)
}
_PREFIX_UNITS = frozenset("$€£¥₹₩")  # written before the number: "1200 euros" is "€1200"
_TIGHT_UNITS = frozenset({"%", "°", "°c", "°f", "′", "″", "¢"})  # written without a space: "15%", "-18°c", "5′"
_SPACE = r"[ \t\u00a0\u202f]"
_SCALE_AFTER = re.compile(rf"{_SPACE}?(hundred|thousand|million|billion|trillion|dozen)(?!{_ALNUM})", re.IGNORECASE)
_UNIT_AFTER = re.compile(
    rf"""(?:(?<=\d)(?P<mark>′′|″|''|"|′|')     # feet and inches, minutes and seconds: right after a digit
    | {_SPACE}?(?:(?P<deg>°{_SPACE}?[cf]?) | (?P<ampm>[ap])\.m\b\.? | per{_SPACE}cent
    | (?P<unit>{"|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))})))(?!{_ALNUM})""",
    re.VERBOSE | re.IGNORECASE,
)
_QUOTES = frozenset("'\"′″")

_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_CALENDAR_VERBS = frozenset({"may", "march"})  # a month only when capitalised
#: Relative dates, times of day and periods ("tomorrow", "the evening", "daily" = "every day" = "day"); after
#: this/next/last ... they keep it ("next week", "last Monday").
# fmt: off
_TIME_WORDS = {
    w: w
    for w in "today tomorrow yesterday tonight noon midnight ago morning afternoon evening night weekend hour day "
    "week fortnight month year decade century".split()
} | {
    "daily": "day", "nightly": "night", "hourly": "hour", "weekly": "week", "fortnightly": "fortnight",
    "monthly": "month", "yearly": "year", "annually": "year", "annual": "year", "years": "year", "centuries": "century",
}
_TIME_WORDS |= {f"{w}s": w for w in "morning afternoon evening night weekend hour day week fortnight month".split()}
_FREQUENCY = {
    "always": "always", "usually": "usually", "normally": "usually", "generally": "usually", "typically": "usually",
    "often": "often", "frequently": "often", "sometimes": "sometimes", "occasionally": "sometimes",
    "rarely": "rarely", "seldom": "rarely",
}
# fmt: on
_DEICTIC = {"this": "this", "next": "next", "coming": "next", "following": "next"} | dict.fromkeys(
    ("last", "past", "previous"), "last"
)
_DEICTIC_BEFORE = re.compile(rf"\b({'|'.join(_DEICTIC)}){_SPACE}+$", re.IGNORECASE)
# Capitalised, these start sentences or titles; they are never what tells two facts apart.
_FUNCTION_WORDS = frozenset(
    """a an the and or but nor so yet if then than i me my mine we us our ours you your yours he him his she her hers
    it its they them their theirs this that these those there here in on at to of for from by with about into onto
    over under after before during since until as is are was were be been being am do does did have has had will
    would can could should shall might must not no yes ok okay oh hi hello hey dear please thanks also just when
    where what which who whom whose why how all some any each every both either neither other another such""".split()
)

# ---- polarity: how many negations, and which words they negate
_NEGATIONS = frozenset(
    "not no never nothing none nobody nowhere neither nor cannot without dont doesnt didnt isnt arent wasnt werent "
    "cant couldnt wont wouldnt shouldnt havent hasnt hadnt".split()
)
#: Verbs of aversion or refusal: each counts as a negation ("I love cilantro" / "I hate cilantro"; "I don't like
#: cilantro" / "I dislike cilantro" stay one fact).
_AVERSIONS = frozenset(
    """dislike dislikes disliked disliking hate hates hated hating loathe loathes loathed loathing detest detests
    detested detesting despise despises despised despising disagree disagrees disagreed disagreeing disapprove
    disapproves disapproved disapproving refuse refuses refused refusing reject rejects rejected rejecting distrust
    distrusts distrusted distrusting""".split()
)
_LETTERS = re.compile(rf"[^\W\d_{_CJK}]+(?:'[^\W\d_{_CJK}]+)*")
#: Where a clause ends: punctuation, a contrasting conjunction, "and"/"or" before a subject pronoun.
_CLAUSE_BREAK = re.compile(
    r"""[,;:!?…()\[\]"“”\n。，；：！？]|\.(?!\w)|\b(?:but|yet|while|whereas|although|though|however|except)\b
    |\b(?:and|or)\b(?=\s+(?:i|you|he|she|we|they|it)\b)""",
    re.VERBOSE | re.IGNORECASE,
)

#: One specific: its kind (what it is compared in order with), the token, and whether it is a capitalised first
#: word (a name only if neither text writes it in lower case).
_Item = tuple[str, str, bool]


@dataclass(frozen=True, slots=True)
class Specifics:
    """The specifics of one text, case-folded, in the order they occur, and its polarity.

    Attributes:
        items: ``(kind, token, tentative)`` per specific, in text order: numbers with their unit (kind ``num <unit>``),
            clock times, identifiers, names, calendar names, relative times, frequencies; ``tentative`` marks a
            capitalised word that starts a sentence (a name, or just the first word).
        common: words written in lower case (and capitalised function words): what resolves a tentative item.
        negations: how many negations ("not", "never", "n't", "no", "hate", 不, 没 ...): "I am allergic to shellfish"
            and "I am not allergic to shellfish" score 0.96 and carry the same words; only the polarity tells them
            apart.
        negated: content words only ever negated (after a negation in its clause).
        affirmed: content words only ever in a clause without a negation.
    """

    items: tuple[_Item, ...]
    common: frozenset[str]
    negations: int = 0
    negated: frozenset[str] = frozenset()
    affirmed: frozenset[str] = frozenset()

    @property
    def definite(self) -> frozenset[str]:
        """The tokens that count whatever the other text is."""
        return frozenset(token for _, token, tentative in self.items if not tentative)

    @property
    def tentative(self) -> frozenset[str]:
        """The capitalised first words: names unless a text writes them in lower case."""
        return frozenset(token for _, token, tentative in self.items if tentative)

    def sequence(self, other: Specifics) -> dict[str, tuple[str, ...]]:
        """Per kind, the tokens that count when this text is compared with ``other``, in order of first occurrence
        (a sentence-initial capitalised word counts unless either text writes it in lower case)."""
        lower = self.common | other.common
        kinds: dict[str, dict[str, None]] = {}  # an ordered set per kind
        for kind, token, tentative in self.items:
            if not (tentative and token in lower):
                kinds.setdefault(kind, {}).setdefault(token)
        return {kind: tuple(tokens) for kind, tokens in kinds.items()}

    def resolved(self, other: Specifics) -> frozenset[str]:
        """The tokens that count when this text is compared with ``other`` (:meth:`sequence`, unordered)."""
        return frozenset(token for tokens in self.sequence(other).values() for token in tokens)

    def same_as(self, other: Specifics) -> bool:
        """True when both texts carry the same specifics, in the same order within each kind, as many negations,
        and no words whose negation moved (module docstring)."""
        return (
            self.negations == other.negations
            and self.sequence(other) == other.sequence(self)
            and not (self.negated & other.affirmed and self.affirmed & other.negated)
        )


def specifics(text: str) -> Specifics:
    """The :class:`Specifics` of ``text`` (any length and language; NFKC-normalised first)."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'").replace("\u2212", "-")
    items: list[_Item] = []
    common: set[str] = set()
    pos = 0
    while m := _TOKEN.search(text, pos):
        pos = m.end()
        word = m.group("word")
        if m.group("url"):
            items.append(("ident", m.group("url").rstrip(_URL_TAIL).casefold(), False))
        elif any(c.isdigit() for c in word):
            item, pos = _numeric(text, m)
            items.append(item)
        elif (counted := _counted(text, m)) is not None:
            item, pos = counted
            items.append(item)
        else:
            _classify_word(text, m.start("word"), word, items, common)
    items += [("cjk-num", run, False) for run in _CJK_NUMERALS.findall(text) if run != "一"]
    items += [("cjk-time", word, False) for word in _CJK_TIME.findall(text)]
    negated, affirmed, negations = _polarity(text)
    return Specifics(tuple(items), frozenset(common), negations, negated, affirmed)


def distinguishing_tokens(text: str) -> frozenset[str]:
    """The specifics of ``text`` on its own, e.g. ``"Bob met Alice at 10:30 on 12 May"`` ->
    ``{"bob", "alice", "10:30", "12", "may"}``."""
    own = specifics(text)
    return own.resolved(own)


def same_specifics(a: str, b: str) -> bool:
    """True only when ``a`` and ``b`` carry the same specifics in the same order and polarity (module docstring).

    ``"... under XJ-4477 last week"`` / ``"... under XJ-4488 last week"`` -> False; ``"Bob likes green tea"`` /
    ``"Bob really likes green tea"`` -> True; ``"Alice owes Bob 50 dollars"`` / ``"Bob owes Alice $50"`` -> False.
    """
    return specifics(a).same_as(specifics(b))


def is_code(word: str) -> bool:
    """Whether ``word`` is a case-sensitive code: digits with letters in both cases ("AbX7q", a locker code, a
    password hint). Its case is part of it; an identifier in one case ("XJ-4477", "ca1234") is the same in another."""
    return any(c.isdigit() for c in word) and any(c.isupper() for c in word) and any(c.islower() for c in word)


def _numeric(text: str, m: re.Match[str]) -> tuple[_Item, int]:
    """A token with a digit: a number with its unit (``5 mg``, ``$1200``, ``7 pm``), else an identifier as written,
    case-folded unless it is a code (:func:`is_code`: ``AbX7q`` is not ``abx7Q``, ``XJ-4477`` is ``xj-4477``)."""
    word, currency, sign = m.group("word"), m.group("cur") or "", m.group("sign") or ""
    parsed = _parse_number(word)
    if parsed is None:
        return ("ident", f"{currency.casefold()}{sign}{word if is_code(word) else word.casefold()}", False), m.end()
    number, unit = parsed
    return _quantity(text, m.start(), m.end(), number, sign, unit, currency)


def _counted(text: str, m: re.Match[str]) -> tuple[_Item, int] | None:
    """A number word with its unit ("three days" = "3 days"; "one" only before a unit: it is also a pronoun), or
    "once"/"twice"/"thrice" ("1 time" ...); None for any other word."""
    folded = m.group("word").casefold()
    if folded in _TIMES_WORDS:
        return ("num time", f"{_TIMES_WORDS[folded]} time", False), m.end()
    number = _NUMBER_WORDS.get(folded)
    if number is None and folded == "one" and (_SCALE_AFTER.match(text, m.end()) or _UNIT_AFTER.match(text, m.end())):
        number = "1"
    if number is None:
        return None
    return _quantity(text, m.start(), m.end(), number, "", "", "")


def _quantity(text: str, start: int, end: int, number: str, sign: str, unit: str, currency: str) -> tuple[_Item, int]:
    """The number at ``text[start:end]`` with a scale word and a unit that follow it (unless ``unit`` was attached:
    ``7pm``), its end; an all-zero fraction of an amount of money is dropped (``$120.00`` = ``$120``)."""
    if not unit:
        scale = _SCALE_AFTER.match(text, end)
        if scale:
            number, end = f"{number} {scale.group(1).casefold()}", scale.end()
        after = _UNIT_AFTER.match(text, end)
        if after and not (after.group("mark") and text[start - 1 : start] in _QUOTES):  # '5' is a quoted 5
            unit, end = _unit_name(after), after.end()
    unit = unit or currency
    if unit in _PREFIX_UNITS:
        whole, dot, fraction = number.partition(".")
        token = f"{unit}{sign}{whole if dot and not fraction.strip('0') else number}"
    else:
        token = f"{sign}{number}{'' if unit in _TIGHT_UNITS or not unit else ' '}{unit}"
    kind = f"num {unit}" if unit else "clock" if ":" in number else "num"
    return (kind, token, False), end


def _unit_name(m: re.Match[str]) -> str:
    """The canonical form of the unit matched by ``_UNIT_AFTER``."""
    if m.group("mark"):
        return "′" if m.group("mark") in ("'", "′") else "″"
    if m.group("deg"):
        return "".join(m.group("deg").split()).casefold()
    if m.group("ampm"):
        return f"{m.group('ampm').casefold()}m"
    return _UNITS[m.group("unit").casefold()] if m.group("unit") else "%"  # the rest: "per cent"


def _parse_number(word: str) -> tuple[str, str] | None:
    """``(number, attached unit)`` of a token with a digit (``12th`` -> 12; ``1,000`` -> 1000; ``7pm`` -> 7, pm;
    ``10:30`` as written); None for an identifier or version (``1.2.3``, ``XJ-4477``, ``2fa``)."""
    ordinal = _ORDINAL.fullmatch(word)
    if ordinal:
        return ordinal.group(1), ""
    if _NUMBER.fullmatch(word):
        number = _normalise_number(word)
        return None if number is None else (number, "")
    if _CLOCK.fullmatch(word):
        return word, ""
    attached = _ATTACHED.fullmatch(word)
    if attached and attached.group(2).casefold() in _UNITS:
        inner = _parse_number(attached.group(1))
        if inner is not None and not inner[1]:
            return inner[0], _UNITS[attached.group(2).casefold()]
    return None


def _normalise_number(s: str) -> str | None:
    """Thousands separators dropped and a decimal comma read as a point, the digits kept as written: ``1,000`` /
    ``1.000`` -> ``1000``, ``1,000.50`` / ``1.000,50`` -> ``1000.50``, ``3,5`` -> ``3.5``, ``4.10`` -> ``4.10`` (not
    ``4.1``: a version, or a precision); None when the separators make no number (``1.2.3``: a version)."""
    groups = re.split(r"[.,]", s)
    seps = re.findall(r"[.,]", s)
    if not seps:
        return s
    if len(set(seps)) == 1 and all(len(g) == 3 for g in groups[1:]) and not groups[0].startswith("0"):
        return "".join(groups)  # thousands separators only
    if len(seps) > 1 and not (seps[-1] != seps[0] and len(set(seps[:-1])) == 1):
        return None
    if any(len(g) != 3 for g in groups[1:-1]):
        return None
    return f"{''.join(groups[:-1])}.{groups[-1]}"


def _classify_word(text: str, start: int, word: str, items: list[_Item], common: set[str]) -> None:
    """File the token ``word`` without digits at ``text[start]`` under ``items`` (with its kind) or ``common``
    (case-folded)."""
    base = word[:-2] if word.lower().endswith("'s") else word
    folded = base.casefold()
    letters = [c for c in base if c.isalpha()]
    if any(c in _CONNECTORS for c in word):
        items.append(("ident", word.casefold(), False))
    elif folded in _TIME_WORDS:
        items.append(("time", _deictic(text, start) + _TIME_WORDS[folded], False))
    elif folded in _FREQUENCY:
        items.append(("freq", _FREQUENCY[folded], False))
    elif folded in _CALENDAR and (base[0].isupper() or folded not in _CALENDAR_VERBS):
        items.append(("cal", _deictic(text, start) + folded, False))
    elif folded in _SCALE_WORDS:
        items.append(("num", folded, False))
    elif not base[0].isupper() and any(c.isupper() for c in letters):
        items.append(("name", folded, False))  # iPhone, macOS
    elif not base[0].isupper() or folded in _FUNCTION_WORDS:
        common.add(folded)
    elif len(letters) > 1 and (all(c.isupper() for c in letters) or any(c.isupper() for c in letters[1:])):
        items.append(("name", folded, False))  # AWS, GitHub
    else:
        items.append(("name", folded, _starts_sentence(text, start)))


def _deictic(text: str, start: int) -> str:
    """The this/next/last before the word at ``start``, kept with a relative time or calendar name ("next week",
    "last monday"; "coming" is "next", "past" and "previous" are "last"), else ""."""
    before = _DEICTIC_BEFORE.search(text[max(0, start - 16) : start])
    return f"{_DEICTIC[before.group(1).casefold()]} " if before else ""


def _polarity(text: str) -> tuple[frozenset[str], frozenset[str], int]:
    """``(negated, affirmed, negations)``: the content words only ever after a negation in their clause, those only
    ever in a clause without one (a word before the negation in its clause is neither: "Bob doesn't eat meat"), and
    the number of negations (``_NEGATIONS``, ``n't``, ``_AVERSIONS``, 不 没 未 别)."""
    negated: set[str] = set()
    affirmed: set[str] = set()
    count = len(_CJK_NEGATION.findall(text))
    for clause in _CLAUSE_BREAK.split(text):
        words = [w.casefold() for w in _LETTERS.findall(clause)]
        flags = [_is_negation(w) for w in words]
        count += sum(flags)
        if any(flags):
            negated.update(_content(words[flags.index(True) + 1 :]))
        else:
            affirmed.update(_content(words))
    return frozenset(negated - affirmed), frozenset(affirmed - negated), count


def _is_negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't") or word in _AVERSIONS


def _content(words: list[str]) -> set[str]:
    return {w for w in words if w not in _FUNCTION_WORDS and not _is_negation(w)}


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text, a sentence, a clause after ``:``/``;``, a line or a quote."""
    before = text[max(0, start - _LOOKBACK) : start]  # bounded: linear in the text, whatever its length
    head = before.rstrip(_LEAD_IN)
    return not head or head[-1] in _SENTENCE_END or "\n" in before[len(head) :]
