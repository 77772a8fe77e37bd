"""The dates task's spellings: a date written in one of many human ways.

Month and weekday names, the templates (numeric dates put the day before the month, except the
ISO form year-month-day, so every input has one right answer), the options and the character
set of the inputs. :func:`~attnbook.data.tasks.make_task` generates the task from them;
:mod:`attnbook.languages` writes the same templates in other languages. Nothing here is public:
the names are the task's internals.
"""

from __future__ import annotations

import datetime
import random

from .._checks import check_positive_int

__all__: list[str] = []

_DATE_OPTIONS = {"start_year": 1900, "end_year": 2099}

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# Each format: (weekday part or None, the date part). Numeric formats put the day before the
# month (the ISO form {y}-{nn}-{dd} aside), so every input has one right answer. {W} weekday,
# {w} its 3-letter form, {M} month, {m} 3-letter month, {d} day, {dd} 2-digit day, {o} ordinal
# day, {n} month number, {nn} 2-digit, {y} year.
_DATE_FORMATS = (
    "{d} {M} {y}",
    "{d} {m} {y}",
    "{o} {M} {y}",
    "{o} of {M} {y}",
    "the {o} of {M}, {y}",
    "{M} {d}, {y}",
    "{M} {o}, {y}",
    "{m} {d}, {y}",
    "{m} {o} {y}",
    "{d}-{m}-{y}",
    "{d}.{n}.{y}",
    "{dd}.{nn}.{y}",
    "{d}/{n}/{y}",
    "{dd}/{nn}/{y}",
    "{dd}-{nn}-{y}",
    "{y}-{nn}-{dd}",
)
_WEEKDAY_PREFIXES = ("{W} ", "{W}, ", "{w} ", "{w}, ")


def _format_date(date: datetime.date, template: str) -> str:
    """Write ``date`` with one of the task's templates (see ``_DATE_FORMATS``)."""
    return template.format(
        W=_WEEKDAYS[date.weekday()],
        w=_WEEKDAYS[date.weekday()][:3],
        M=_MONTHS[date.month - 1],
        m=_MONTHS[date.month - 1][:3],
        d=date.day,
        dd=f"{date.day:02d}",
        o=_ordinal(date.day),
        n=date.month,
        nn=f"{date.month:02d}",
        y=date.year,
    )


def _human_date(rng: random.Random, date: datetime.date) -> str:
    template = rng.choice(_DATE_FORMATS)
    if not template.startswith("{y}") and rng.random() < 0.4:  # ISO input keeps no weekday
        template = rng.choice(_WEEKDAY_PREFIXES) + template
    text = _format_date(date, template)
    case = rng.random()
    return text.lower() if case < 0.3 else text.upper() if case < 0.45 else text


def _date_charset() -> str:
    names = " ".join(_MONTHS + _WEEKDAYS) + " st nd rd th of the"
    chars = set(names) | set(names.lower()) | set(names.upper()) | set("0123456789 ,.-/")
    return "".join(sorted(chars))


def _date_options(options: dict) -> dict:
    unknown = set(options) - set(_DATE_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown option(s) {sorted(unknown)} for task 'dates'; the options "
            f"are {sorted(_DATE_OPTIONS)}"
        )
    opts = {**_DATE_OPTIONS, **options}
    for name in ("start_year", "end_year"):
        check_positive_int(name, opts[name])
        if opts[name] > 9999:
            raise ValueError(f"{name} must be <= 9999, got {opts[name]}")
    if opts["start_year"] > opts["end_year"]:
        raise ValueError(
            f"start_year must be <= end_year, got {opts['start_year']} and {opts['end_year']}"
        )
    return opts
