"""Selector corpus: (selector, message, expected) cases, with expectations worked out by hand.

Data only (no pyspark): tests/spark/test_selector_parity.py runs every case through Spark and
through the reference evaluator, tests/unit/test_selector_evaluate.py through the evaluator.
``expected`` is three-valued: True (matches), False, None (unknown: does not match either, but
``NOT`` keeps it unknown). Messages are full rows of ``schemas.TOPIC``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from typing import Any

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


@dataclasses.dataclass(frozen=True)
class Case:
    selector: str
    message: dict[str, Any]
    expected: bool | None


def typed(kind: str | None, **fields: Any) -> dict[str, Any]:
    """One application-property struct exactly as given (schemas.PROPERTY_VALUE)."""
    return {"type": kind, **fields}


def prop(value: Any) -> dict[str, Any]:
    """The struct the front end stores for a plain Python value (int → long, float → double)."""
    if isinstance(value, dict):
        return value
    if value is None:
        return typed("null")
    if isinstance(value, bool):
        return typed("boolean", bool=value)
    if isinstance(value, int):
        return typed("long", long=value)
    if isinstance(value, float):
        return typed("double", double=value)
    if isinstance(value, bytes):
        return typed("binary", string=value.hex())
    return typed("string", string=value)


def msg(props: dict[str, Any] | None = None, **columns: Any) -> dict[str, Any]:
    """A topic row: defaults (no properties, priority 4, not durable, no ids) plus ``columns``."""
    row: dict[str, Any] = {
        "seq": 0,
        "published_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "publisher": "publisher-1",
        "routing_key": "k",
        "partition": 0,
        "size": 1,
        "durable": False,
        "priority": 4,
        "ttl": None,
        "message_id": None,
        "user_id": None,
        "to": None,
        "subject": None,
        "reply_to": None,
        "correlation_id": None,
        "content_type": None,
        "content_encoding": None,
        "absolute_expiry_time": None,
        "creation_time": None,
        "group_id": None,
        "group_sequence": None,
        "reply_to_group_id": None,
        "application_properties": [(k, prop(v)) for k, v in (props or {}).items()],
        "message": b"",
    }
    unknown = set(columns) - set(row)
    assert not unknown, unknown
    row.update(columns)
    return row


EMPTY = msg()
NO_MAP = msg(application_properties=None)
PROPS = msg(
    {
        "color": "red",
        "size": 5,
        "i": typed("int", long=7),
        "weight": 2.5,
        "f": typed("float", double=1.5),
        "flag": True,
        "off": False,
        "name": "Widget",
        "sym": typed("symbol", string="sym-a"),
        "ch": typed("char", string="x"),
        "empty": "",
        "big": LONG_MAX,
        "small": LONG_MIN,
        "neg": -3,
        "zero": 0,
        "nul": None,
        "bin": b"\xab\xcd",
        "uuid": typed("uuid", string="12345678-1234-5678-1234-567812345678"),
        "ts": typed("timestamp", long=1_700_000_000_000),
        "ulbig": typed("ulong", double=1.8446744073709552e19),
        "nan": math.nan,
        "pinf": math.inf,
        "pct": "100%",
        "under": "a_b",
        "nl": "line1\nline2",
        "quote": "it's",
        "bs": "back\\slash",
        "uni": "日本語",
        "emoji": "😀",
        "mixed": "Hello World",
        "meta": "a.b*c+d?(e)[f]{g}|h^i$j\\k",
        "qe": "\\Q.\\E",
    }
)
HEADERS = msg(
    message_id="ID:abc-1",
    correlation_id="corr-7",
    subject="order.created",
    reply_to="replies",
    priority=7,
    durable=True,
    creation_time=1_700_000_000_123,
    absolute_expiry_time=1_700_000_600_000,
    user_id=b"alice",
    group_id="g1",
    group_sequence=3,
)
TF = msg({"t": True, "f": False})


def _cases(message: dict[str, Any], table: str) -> list[Case]:
    """Cases from lines ``expected | selector`` (expected: T, F or U for unknown)."""
    out = []
    for line in table.strip().splitlines():
        mark, _, selector = line.strip().partition(" | ")
        out.append(Case(selector, message, {"T": True, "F": False, "U": None}[mark]))
    return out


CONSTANTS = _cases(
    EMPTY,
    r"""
    T | TRUE
    F | FALSE
    T | true
    F | fAlSe
    T | 1 = 1
    F | 1 <> 1
    T | 1 = 1.0
    T | 1 < 2
    T | 2 <= 2
    T | 3 > 2.5
    F | 3 >= 3.5
    T | 'a' = 'a'
    T | 'a' <> 'b'
    F | 'a' = 'A'
    T | 'it''s' = 'it''s'
    T | TRUE = TRUE
    T | TRUE <> FALSE
    T | 0x1F = 31
    T | 0X1f = 31
    T | 0x7FFFFFFFFFFFFFFF = 9223372036854775807
    T | 017 = 15
    T | 0 = 0
    T | 00 = 0
    T | 10L = 10
    T | 10l = 10
    T | 0x10L = 16
    T | 5. = 5
    T | .5 = 0.5
    T | 5.5E1 = 55
    T | 5E2 = 500
    T | 5e-1 = .5
    T | 5.E1 = 50
    T | 1.5F = 1.5
    F | 1.1F = 1.1
    T | 1.1f = 1.100000023841858
    T | 1.1D = 1.1
    T | 2D = 2
    T | 09.5 = 9.5
    T | -9223372036854775808 < 0
    T | 9223372036854775807 > 0
    F | 9223372036854775807 = 9223372036854775806
    T | 9223372036854775807 = 9223372036854775807.0
    T | 9223372036854775806 = 9.223372036854775807E18
    F | 9223372036854775807 > 9223372036854775806.0
    T | 9223372036854775807 > 9223372036854775806
    F | 0.1 + 0.2 = 0.3
    T | 0.1 + 0.2 > 0.3
    T | 1 + 2 * 3 = 7
    T | (1 + 2) * 3 = 9
    T | 10 - 2 - 3 = 5
    T | 100 / 10 / 5 = 2
    T | 7 / 2 = 3
    T | -7 / 2 = -3
    T | 7 / -2 = -3
    T | -7 / -2 = 3
    T | 7.0 / 2 = 3.5
    T | 7 / 2.0 = 3.5
    T | 7 % 3 = 1
    T | -7 % 3 = -1
    T | 7 % -3 = 1
    T | 7.5 % 2 = 1.5
    T | -7.5 % 2 = -1.5
    U | 1 / 0 = 0
    T | 1 / 0 IS NULL
    T | 1.0 / 0 IS NULL
    T | 1 / 0.0 IS NULL
    T | 1 % 0 IS NULL
    T | 1.5 % 0.0 IS NULL
    T | 0.0 / 0.0 IS NULL
    U | NOT (1 / 0 = 0)
    T | 1 / 0 = 0 OR TRUE
    F | 1 / 0 = 0 AND FALSE
    F | 9223372036854775807 + 1 IS NULL
    T | 9223372036854775807 + 1 > 0
    T | 9223372036854775807 + 1 = 9.223372036854775808E18
    T | 9223372036854775807 + 1 = 9223372036854775807 + 0.5
    F | -9223372036854775808 - 1 IS NULL
    F | -9223372036854775808 - 1 < -9223372036854775807
    T | -9223372036854775808 - 1 = -9.223372036854775808E18
    F | 9223372036854775807 * 2 IS NULL
    T | 9223372036854775807 * 2 = 1.8446744073709552E19
    F | -9223372036854775808 * -1 IS NULL
    F | -9223372036854775808 / -1 IS NULL
    T | -9223372036854775808 / -1 = 9.223372036854775808E18
    T | -9223372036854775808 / -1 = 9223372036854775807
    T | 3037000500 * 3037000500 > 0
    T | 3037000499 * 3037000499 = 9223372030926249001
    T | -9223372036854775808 % -1 = 0
    T | -9223372036854775808 / 1 = -9223372036854775808
    F | 9223372036854775807 + 1.0 > 9223372036854775807
    T | 9223372036854775806 + 1 = 9223372036854775807
    F | 4611686018427387904 * 2 - 1 IS NULL
    T | 4611686018427387904 * 2 - 1 = 9.223372036854775808E18
    T | 4611686018427387904 * 2 / 2 = 4611686018427387904
    T | 4611686018427387904 * -2 = -9223372036854775808
    T | - 5 = -5
    T | -(-5) = 5
    T | - -5 = 5
    T | +5 = 5
    T | -(2 + 3) = -5
    T | -0.0 = 0.0
    T | 1E308 * 10 > 1E308
    T | 1E308 * 10 = 1E308 * 10
    T | -1E308 * 10 < -1E308
    T | 1E308 * 10 - 1E308 * 10 IS NULL
    T | 2 * 0.5 = 1
    T | 1 / 3 * 3 = 0
    T | 1.0 / 3 * 3 = 1
    T | 4.9E-324 > 0
    T | 4.9E-324 / 2 = 0
    T | 'é' = 'é'
    F | 'é' = 'e'
    T | '😀' LIKE '_'
    T | '😀x' LIKE '__'
    T | 'a\b' = 'a\b'
    T | 'a_' LIKE 'a\_' ESCAPE '\'
    F | 'ab' LIKE 'a\_' ESCAPE '\'
    T | '\' LIKE '\\' ESCAPE '\'
    T | 'a\nb' LIKE 'a\nb'
    T | '' = ''
    T | '' LIKE '%'
    F | '' LIKE '_'
    T | 'abc' IN ('x', 'abc')
    T | 'abc' NOT IN ('x', 'y')
    T | 'ABC' LIKE 'A%'
    T | 1 IS NOT NULL
    F | 'x' IS NULL
    F | TRUE IS NULL
    T | (1 = 1) = (2 = 2)
    T | (1 = 1) <> (2 = 3)
    T | 2 BETWEEN 1 AND 3
    F | 2 NOT BETWEEN 1 AND 3
    T | 2.5 BETWEEN 2 AND 3
    """,
)

PROPERTIES = _cases(
    PROPS,
    r"""
    T | color = 'red'
    F | color = 'blue'
    T | color <> 'blue'
    F | color = 'RED'
    U | Color = 'red'
    T | color IN ('red', 'green')
    F | color IN ('green')
    T | color NOT IN ('green')
    F | color NOT IN ('red')
    U | missing IN ('red')
    U | missing NOT IN ('red')
    U | size IN ('5')
    T | sym = 'sym-a'
    T | sym LIKE 'sym%'
    T | ch = 'x'
    T | empty = ''
    F | empty IS NULL
    T | empty LIKE '%'
    F | empty LIKE '_'
    T | size = 5
    T | size = 5.0
    T | size > 4
    T | size >= 5
    F | size < 5
    F | size <= 4.9
    T | 5 = size
    U | size = '5'
    U | size <> '5'
    U | NOT (size = '5')
    T | i = 7
    T | i + size = 12
    T | i * size = 35
    T | i - size = 2
    T | size / 2 = 2
    T | size / 2.0 = 2.5
    T | size % 2 = 1
    T | -size = -5
    T | - size < 0
    T | +size = 5
    T | weight = 2.5
    T | weight > 2
    T | weight * 2 = 5
    T | weight * 2 = size
    T | size / weight = 2
    T | f = 1.5
    T | f + weight = 4
    T | flag
    F | off
    F | NOT flag
    T | NOT off
    T | flag = TRUE
    T | off = FALSE
    T | flag <> off
    U | flag = 1
    T | flag AND size = 5
    T | off OR size = 5
    F | off AND missing = 1
    U | flag AND missing = 1
    T | flag OR missing = 1
    U | off OR missing = 1
    U | color
    U | NOT color
    U | size
    U | missing
    U | NOT missing
    T | missing IS NULL
    F | missing IS NOT NULL
    F | color IS NULL
    T | color IS NOT NULL
    T | nul IS NULL
    U | nul = 'x'
    U | nul = 1
    F | bin IS NULL
    T | bin IS NOT NULL
    U | bin = 'abcd'
    U | bin LIKE '%'
    U | bin = bin
    T | uuid IS NOT NULL
    U | uuid LIKE '%'
    U | uuid = '12345678-1234-5678-1234-567812345678'
    T | ts = 1700000000000
    T | ts > 0
    T | ulbig > 9223372036854775807
    T | ulbig = 1.8446744073709552E19
    T | ulbig IS NOT NULL
    U | ulbig IN ('x')
    F | nan IS NULL
    U | nan = nan
    U | nan <> 1
    U | nan + 1 > 0
    T | pinf > 1E308
    T | pinf = pinf
    T | pinf - pinf IS NULL
    T | pinf * 0 IS NULL
    T | pinf % 2 IS NULL
    T | 5 % pinf = 5
    T | big = 9223372036854775807
    F | big = 9223372036854775806
    T | big - 1 = 9223372036854775806
    F | big + 1 IS NULL
    F | big + 1 = 0
    F | big + 1 > big
    T | big + 1 >= big
    F | big + 1 > big + 0.0
    T | big * big > 0
    T | big + 0 = big
    T | big * -1 = -9223372036854775807
    T | small = -9223372036854775808
    F | small - 1 IS NULL
    F | -small IS NULL
    T | -small = 9.223372036854775808E18
    F | small / -1 IS NULL
    T | small / -1 > 0
    T | small / 1 = small
    T | small % -1 = 0
    T | small * 1 = small
    T | big > small
    T | big + small = -1
    T | big = 9.223372036854775807E18
    T | big - 1 = 9.223372036854775807E18
    T | big BETWEEN 9223372036854775806 AND 9223372036854775807
    F | big BETWEEN 0 AND 9223372036854775806
    T | neg = -3
    T | neg < 0
    T | neg / 2 = -1
    T | neg % 2 = -1
    T | zero = 0
    T | size / zero IS NULL
    T | size % zero IS NULL
    T | weight / zero IS NULL
    T | weight / 0.0 IS NULL
    T | zero / size = 0
    T | size / zero = 1 OR flag
    T | size BETWEEN 1 AND 10
    T | size BETWEEN 5 AND 5
    F | size BETWEEN 6 AND 10
    T | size NOT BETWEEN 6 AND 10
    F | size NOT BETWEEN 1 AND 10
    F | size BETWEEN 10 AND 1
    T | weight BETWEEN 2 AND 3
    T | size BETWEEN 4.5 AND 5.5
    U | missing BETWEEN 1 AND 10
    U | missing NOT BETWEEN 1 AND 10
    U | color BETWEEN 1 AND 10
    U | size BETWEEN missing AND 10
    F | size BETWEEN missing AND 4
    T | size NOT BETWEEN missing AND 4
    T | size BETWEEN 1 + 1 AND size * 2
    T | 1 + size BETWEEN 6 AND 6
    T | name LIKE 'Wid%'
    F | name LIKE 'wid%'
    T | name LIKE '%get'
    T | name LIKE '%dg%'
    T | name LIKE 'W_dget'
    F | name LIKE 'W_get'
    T | name LIKE '______'
    F | name LIKE '_____'
    F | name LIKE '_______'
    T | name LIKE '%'
    T | name LIKE '%%%'
    T | name LIKE 'W%%t'
    T | name LIKE 'Widget'
    F | name LIKE 'Widge'
    F | name LIKE 'idget'
    F | name NOT LIKE 'Wid%'
    T | name NOT LIKE 'X%'
    T | name LIKE 'W%d%t'
    F | name LIKE 'W%x%t'
    U | missing LIKE '%'
    U | missing NOT LIKE '%'
    U | size LIKE '5'
    U | flag LIKE '%'
    T | pct LIKE '100\%' ESCAPE '\'
    T | pct LIKE '100!%' ESCAPE '!'
    F | pct LIKE '10!%' ESCAPE '!'
    T | pct LIKE '%!%' ESCAPE '!'
    F | name LIKE '%!%' ESCAPE '!'
    T | pct LIKE '100%%' ESCAPE '%'
    T | under LIKE 'a!_b' ESCAPE '!'
    F | name LIKE 'W!_dget' ESCAPE '!'
    T | under LIKE 'a__b' ESCAPE '_'
    T | name LIKE 'W!idget' ESCAPE '!'
    F | name LIKE 'Wi!!dget' ESCAPE '!'
    T | under LIKE 'a__'
    F | under LIKE 'a_'
    T | nl LIKE 'line1%'
    T | nl LIKE 'line1_line2'
    T | nl LIKE '%2'
    F | nl LIKE 'line1'
    T | quote = 'it''s'
    T | quote LIKE 'it''%'
    T | bs = 'back\slash'
    T | bs LIKE 'back\%'
    T | bs LIKE 'back\\slash' ESCAPE '\'
    F | bs LIKE 'back\slash' ESCAPE '\'
    T | uni = '日本語'
    T | uni LIKE '日%'
    T | uni LIKE '___'
    F | uni LIKE '__'
    T | emoji LIKE '_'
    T | emoji = '😀'
    T | emoji LIKE '%😀%'
    F | mixed LIKE 'Hello.World'
    T | mixed LIKE 'Hello World'
    F | mixed LIKE '(Hello)%'
    F | mixed LIKE '%[a-z]%'
    F | mixed LIKE 'Hello*'
    F | mixed LIKE '^Hello%'
    F | mixed LIKE '%World$'
    F | mixed LIKE 'hello world'
    T | meta LIKE 'a.b*c+d?(e)[f]{g}|h^i$j\k'
    T | meta LIKE 'a_b_c_d_(e)[f]{g}|h^i$j\k'
    T | meta LIKE 'a.b%'
    F | meta LIKE 'a_b_c_d_(e)[f]{g}|h^i$j\'
    T | meta = 'a.b*c+d?(e)[f]{g}|h^i$j\k'
    T | qe LIKE '\Q_\E'
    T | qe LIKE '\Q.\E'
    F | qe LIKE '\Q.'
    U | color = 5
    U | color > 5
    U | color + 1 = 6
    T | color + 1 IS NULL
    U | size = TRUE
    U | flag = 'true'
    U | flag > 0
    T | flag + 1 IS NULL
    T | -color IS NULL
    T | +color IS NULL
    U | color = flag
    U | size = color
    U | size <> color
    U | NOT (size = color)
    U | color < name
    T | color <> name
    U | name > color
    U | flag < off
    T | size = 5 AND color = 'red' OR size = 6
    T | size = 6 AND color = 'red' OR size = 5
    F | size = 6 AND (color = 'red' OR size = 5)
    F | NOT size = 5
    T | NOT size = 6 AND NOT color = 'blue'
    T | size * 2 + 1 = 11
    T | size * (2 + 1) = 15
    T | size - 2 * 2 = 1
    T | -size * -2 = 10
    T | size / 2 * 2 = 4
    T | size = 5 = TRUE
    T | size > 4 = TRUE
    T | size IS NOT NULL = TRUE
    T | color = 'red' and size = 5
    F | NoT flag
    T | size bEtWeEn 1 AnD 10
    T | color iN ('red')
    T | name lIkE 'W%'
    T | missing iS nUlL
    T | color = 'red' -- comment
    T | /* c */ color = 'red'
    T | color /* in */ = /* the */ 'red'
    F | color = '--not a comment'
    T | size = 5--6
    T | size = 5 - -0
    T | size = 0x5 AND size = 05 AND size = 5L AND size = 5.0F AND size = 0.5E1
    """,
) + [
    Case("color = 'red'\n-- comment\nAND size = 5", PROPS, True),
    Case("color\t=\r\n'red'", PROPS, True),
    Case("color = 'red' /* multi\nline */ AND size = 5", PROPS, True),
    Case("nl = 'line1\nline2'", PROPS, True),
    Case("\fcolor = 'red'\n", PROPS, True),
]

HEADER_CASES = _cases(
    HEADERS,
    r"""
    T | JMSMessageID = 'ID:abc-1'
    T | JMSMessageID LIKE 'ID:%'
    T | JMSCorrelationID = 'corr-7'
    T | JMSType = 'order.created'
    T | JMSType LIKE 'order.%'
    F | JMSType LIKE 'order_'
    T | JMSType IN ('order.created', 'x')
    T | JMSReplyTo = 'replies'
    T | JMSPriority = 7
    T | JMSPriority > 4
    F | JMSPriority < 7
    T | JMSPriority + 1 = 8
    T | JMSPriority / 2 = 3
    T | JMSPriority BETWEEN 5 AND 9
    T | JMSDeliveryMode = 'PERSISTENT'
    F | JMSDeliveryMode = 'NON_PERSISTENT'
    T | JMSTimestamp = 1700000000123
    T | JMSTimestamp > 1700000000000
    T | JMSExpiration = 1700000600000
    T | JMSExpiration - JMSTimestamp = 599877
    T | JMSXUserID = 'alice'
    T | JMSXUserID LIKE 'a%'
    T | JMSXGroupID = 'g1'
    T | JMSXGroupSeq = 3
    T | JMSXGroupSeq > 2 AND JMSXGroupID = 'g1'
    T | "JMSPriority" = 7
    U | jmspriority = 7
    U | JMSFoo = 1
    T | JMSMessageID IS NOT NULL AND JMSXUserID IS NOT NULL
    F | JMSPriority IS NULL
    T | JMSType = 'order.created' AND JMSPriority >= 5 AND JMSDeliveryMode = 'PERSISTENT'
    """,
) + _cases(
    EMPTY,
    r"""
    T | JMSMessageID IS NULL
    U | JMSMessageID = 'x'
    U | JMSMessageID <> 'x'
    T | JMSCorrelationID IS NULL
    T | JMSType IS NULL
    U | JMSType LIKE '%'
    T | JMSReplyTo IS NULL
    T | JMSPriority = 4
    T | JMSPriority BETWEEN 0 AND 4
    F | JMSDeliveryMode = 'PERSISTENT'
    T | JMSDeliveryMode = 'NON_PERSISTENT'
    T | JMSTimestamp = 0
    T | JMSExpiration = 0
    F | JMSExpiration IS NULL
    T | JMSXUserID IS NULL
    T | JMSXGroupID IS NULL
    T | JMSXGroupSeq IS NULL
    U | JMSXGroupSeq = 0
    """,
) + [
    Case("JMSPriority = 4", msg(priority=None), True),
    Case("JMSPriority = 0", msg(priority=0), True),
    Case("JMSPriority = 9", msg(priority=9), True),
    Case("JMSDeliveryMode = 'NON_PERSISTENT'", msg(durable=None), True),
    Case("JMSPriority = 7", msg({"JMSPriority": 1}, priority=7), True),
    Case("JMSXUserID IS NULL", msg(user_id=b"\xc3\x28"), True),
    Case("JMSXUserID LIKE '%'", msg(user_id=b"\xc3\x28"), None),
    Case("JMSXUserID IS NULL", msg(user_id=b"\xed\xa0\x80"), True),
    Case("JMSXUserID IS NULL", msg(user_id=b"\xff"), True),
    Case("JMSXUserID = 'björn'", msg(user_id="björn".encode()), True),
    Case("JMSXUserID LIKE 'bj_rn'", msg(user_id="björn".encode()), True),
    Case("JMSXUserID = ''", msg(user_id=b""), True),
    Case("JMSMessageID = JMSCorrelationID", msg(message_id="x", correlation_id="x"), True),
    Case("JMSMessageID = JMSCorrelationID", msg(message_id="x", correlation_id=None), None),
    Case("JMSTimestamp = 9223372036854775807", msg(creation_time=LONG_MAX), True),
    Case("JMSTimestamp = 9223372036854775806", msg(creation_time=LONG_MAX), False),
    Case("JMSTimestamp + 1 IS NULL", msg(creation_time=LONG_MAX), False),
    Case("JMSTimestamp + 1 > JMSTimestamp", msg(creation_time=LONG_MAX), False),  # both 2^63 as doubles
    Case("JMSExpiration < JMSTimestamp", msg(creation_time=5, absolute_expiry_time=4), True),
    Case("JMSXGroupSeq = 4294967295", msg(group_sequence=4_294_967_295), True),
]

LOGIC = _cases(
    TF,
    r"""
    T | t AND t
    F | t AND f
    U | t AND u
    F | f AND u
    F | u AND f
    U | u AND u
    T | t OR f
    F | f OR f
    U | f OR u
    T | u OR t
    U | u OR u
    F | NOT t
    T | NOT f
    U | NOT u
    T | NOT NOT t
    T | t AND NOT f
    F | NOT t OR f
    F | f OR t AND f
    T | (f OR t) AND t
    T | t = (1 = 1)
    F | t = f
    U | (u = 1) = t
    F | t IS NULL
    T | (u = 1) IS NULL
    T | (t AND u) IS NULL
    T | (f AND u) IS NOT NULL
    F | NOT (u = 1) IS NULL
    T | NOT (t AND u) IS NOT NULL
    U | NOT (t AND u)
    T | NOT (f AND u)
    F | NOT (t OR u)
    U | NOT (f OR u)
    T | t AND (f OR t) AND NOT (f AND t)
    """,
)

QUOTED = [
    Case('"my.quoted-var" = 1', msg({"my.quoted-var": 1}), True),
    Case('"with ""quotes""" = 1', msg({'with "quotes"': 1}), True),
    Case('"NULL" = 0', msg({"NULL": 0}), True),
    Case("\"AND\" = 'x'", msg({"AND": "x"}), True),
    Case('"" IS NULL', EMPTY, True),
    Case('"" = 1', msg({"": 1}), True),
    Case('"日本" = 1', msg({"日本": 1}), True),
    Case('"a b" = 1', msg({"a b": 1}), True),
    Case("\"it's\" = 1", msg({"it's": 1}), True),
    Case('"back\\slash" = 1', msg({"back\\slash": 1}), True),
    Case('"back\\slash" = 1', msg({"back\\\\slash": 1}), None),
    Case("$x = 1 AND _y = 2 AND a$b_c9 = 3", msg({"$x": 1, "_y": 2, "a$b_c9": 3}), True),
    Case('"x" = x', msg({"x": 1}), True),
    Case("x IS NULL", NO_MAP, True),
    Case("x = 1", NO_MAP, None),
    Case("NOT (x = 1)", NO_MAP, None),
]


def _each_type(selector: str, cases: list[tuple[Any, bool | None]]) -> list[Case]:
    return [Case(selector, msg({"x": value}), expected) for value, expected in cases]


TYPES = (
    _each_type(
        "x = 5",
        [
            (5, True),
            (typed("int", long=5), True),
            (typed("short", long=5), True),
            (typed("byte", long=5), True),
            (typed("ubyte", long=5), True),
            (typed("ushort", long=5), True),
            (typed("uint", long=5), True),
            (typed("ulong", long=5), True),
            (typed("timestamp", long=5), True),
            (5.0, True),
            (typed("float", double=5.0), True),
            (typed("int", double=5.0), True),  # no long: read as the double it carries
            ("5", None),
            (typed("symbol", string="5"), None),
            (True, None),
            (None, None),
            (b"\x05", None),
            (6, False),
            (5.000001, False),
            (typed("decimal64", string="5"), None),
            (typed("int"), None),
            (typed("string"), None),
            (typed(None, long=5), None),
            (typed("LONG", long=5), None),
        ],
    )
    + _each_type(
        "x IS NULL",
        [
            (5, False),
            (None, True),
            (typed(None, long=5), True),
            (typed("int"), False),
            (typed("string"), False),
            (typed("decimal64", string="5"), False),
            (math.nan, False),
            (typed("list", string="[1]"), False),
            (typed("boolean"), False),
        ],
    )
    + _each_type(
        "x > 4.5",
        [(5, True), (4, False), (4.5, False), (4.75, True), (-math.inf, False), (math.inf, True), ("5", None), (False, None)],
    )
    + _each_type(
        "x = 'a'",
        [
            ("a", True), (typed("symbol", string="a"), True), (typed("char", string="a"), True), ("b", False), (1, None),
            (typed("binary", string="a"), None),
        ],
    )
    + _each_type("x", [(True, True), (False, False), (1, None), ("true", None), (None, None)])
    + _each_type("NOT x", [(True, False), (False, True), (1, None), ("true", None), (None, None)])
    + _each_type("x = 0x1F AND x = 037 AND x = 31L AND x = 3.1E1 AND x = 31.0F", [(31, True), (31.0, True), (30, False)])
    + _each_type("x * 2 = 0", [(0.0, True), (-0.0, True), (0, True)])
    + _each_type("x / 2 = 2", [(5, True), (5.0, False), (4.0, True), (-5, False)])
    + _each_type("-x = 0", [(0, True), (0.0, True), (-0.0, True)])
    + _each_type(
        "x BETWEEN -9223372036854775808 AND 9223372036854775807",
        [
            (LONG_MIN, True), (LONG_MAX, True), (0, True), (1e19, False), (-1e19, False),
            (typed("ulong", double=1.8446744073709552e19), False),
        ],
    )
)

CORPUS: list[Case] = CONSTANTS + PROPERTIES + HEADER_CASES + LOGIC + QUOTED + TYPES
