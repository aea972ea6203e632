"""Amounts: numbers, and prices (an amount and an ISO 4217 currency code), out of page text.

Both read the text with the ``price-parser`` library (it finds the number among words, guesses
the decimal separator, reads ``1.299,99``, ``1,299.99`` and ``CHF 1'234.50``). For prices this
module turns the currency's spelling into an ISO 4217 code. A symbol that names one currency
maps to it (``€`` EUR, ``£`` GBP, ``zł`` PLN, ``R$`` BRL, ...); a symbol shared by several
currencies (``$``, ``¥``, ``kr``) is read as the field's own ``currency`` when it has one (the
site's currency: a Canadian shop's ``$`` is CAD), else as its documented default (``$`` USD,
``¥`` JPY) or as unknown (``kr``). docs/sites.md has the table. Pure functions, no Scrapy.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from price_parser import Price

__all__ = ["CURRENCY_CODES", "currency_code", "to_number", "to_price"]

#: ISO 4217 codes a field's ``currency`` may name: those in use in 2026 (fund and metal codes
#: included), plus HRK, SLL and ZWL, withdrawn lately but still on old pages.
CURRENCY_CODES: frozenset[str] = frozenset("""
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN
    BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP
    ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS INR IQD IRR
    ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD
    MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR
    PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL
    THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF
    XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL
""".split())

# Symbols (lower-cased) that name one currency. Codes need no entry: "EUR", "eur" are codes.
_SYMBOLS: dict[str, str] = {
    "€": "EUR", "£": "GBP", "us$": "USD", "c$": "CAD", "ca$": "CAD", "a$": "AUD", "au$": "AUD",
    "nz$": "NZD", "hk$": "HKD", "s$": "SGD", "mx$": "MXN", "nt$": "TWD", "r$": "BRL",
    "ar$": "ARS", "cn¥": "CNY", "￥": "JPY", "円": "JPY", "元": "CNY", "rmb": "CNY", "₹": "INR",
    "₩": "KRW", "₽": "RUB", "руб": "RUB", "руб.": "RUB", "₴": "UAH", "₪": "ILS", "฿": "THB",
    "₫": "VND", "₱": "PHP", "₦": "NGN", "₺": "TRY", "zł": "PLN", "kč": "CZK", "ft": "HUF",
    "lei": "RON", "fr.": "CHF",
}
# Symbols shared by several currencies: the field's ``currency`` decides, else this default
# (``None``: no default, the currency stays unknown).
_SHARED: dict[str, str | None] = {"$": "USD", "¥": "JPY", "kr": None, "kr.": None, "rs": None,
                                  "rs.": None}

# A plain decimal literal: dot as the decimal point, no group separators (schema.org's form).
_PLAIN_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def currency_code(spelling: str | None, default: str | None = None) -> str | None:
    """The ISO 4217 code a currency ``spelling`` names: a code (any case), a symbol that names
    one currency, or a shared symbol (``$``), read as ``default`` when given, else as its own
    default. ``None`` for no spelling or one not known (then ``default``)."""
    if not spelling:
        return default
    key = spelling.strip().lower()
    if key.upper() in CURRENCY_CODES:
        return key.upper()
    if key in _SYMBOLS:
        return _SYMBOLS[key]
    if key in _SHARED:
        return default if default is not None else _SHARED[key]
    return default


def to_price(value: str | int | float, currency: str | None = None,
             structured_currency: str | None = None, *, structured: bool = False
             ) -> dict[str, float | str | None]:
    """``{"amount": float, "currency": ISO code or None}`` for a price text or a number.

    ``currency`` is the field's default (an ISO code: the currency of a text without one, and the
    reading of shared symbols). ``structured_currency`` is a ``priceCurrency`` found beside the
    value in JSON-LD or microdata: when it names a currency it wins over the text. A JSON number
    is taken as it is, and so is a plain decimal literal from structured data (``structured``:
    schema.org writes ``1234.567`` with a decimal point and no group separator, where a page's
    ``1.234`` is price-parser's 1234). Any other text goes through price-parser. A text without
    a digit is no price, except the word ``free`` alone, a price of 0. Raises ``ValueError``
    when the text holds no amount.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is no price")
    if isinstance(value, int | float) or (structured and _PLAIN_DECIMAL.fullmatch(value.strip())):
        amount: Decimal | None = _decimal(str(value).strip())
        spelling = None
    else:
        price = Price.fromstring(value)
        amount, spelling = price.amount, price.currency
        if not _has_digit(value):
            # price-parser reads any text containing "free" as 0 ("Free shipping", say): only
            # the word alone is taken for a price.
            amount = Decimal(0) if value.strip().lower() == "free" else None
    if amount is None or not math.isfinite(float(amount)):
        raise ValueError("no amount")
    code = currency_code(structured_currency) if structured_currency else None
    if code is None:
        code = currency_code(spelling, currency)
    return {"amount": float(amount), "currency": code}


def to_number(value: str | int | float) -> float:
    """A float for a number text or a JSON number. A plain decimal literal (``12``, ``-0.5``,
    ``1e3``, ``1.234``) is read as Python reads it, dot as the decimal point; anything else
    through price-parser's number reading (``1,299.5``, ``1.299,5``, ``1 299,50``,
    ``4.5 out of 5``, ``CHF 1'234.50``), a minus sign right before the number kept. Raises
    ``ValueError`` when there is no number."""
    if isinstance(value, bool):
        raise ValueError("a boolean is no number")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = value.strip().replace("\u2212", "-")  # U+2212 MINUS SIGN
        if _PLAIN_DECIMAL.fullmatch(text):
            number = float(text)
        else:
            price = Price.fromstring(text)
            if price.amount is None or price.amount_text is None or not _has_digit(text):
                raise ValueError("no number")
            number = float(price.amount)
            at = text.find(price.amount_text)
            if at > 0 and text[:at].rstrip().endswith("-"):
                number = -number
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text)
    except InvalidOperation:
        return None
