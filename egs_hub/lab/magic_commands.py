"""The ``%egs`` line magic's commands, parsed from the line (pure: no I/O, ``now`` is a parameter).

Vocabulary: a *line* is what follows ``%egs``; a *command* is one of the
dataclasses below; a *count* is a number of GPUs or of whole nodes; a priority
*band* is low (1-100), medium (101-200) or high (201-300). Bad input raises
``CommandError`` with one line naming what is wrong.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo

from ..client import GPR
from ..core.endpoints import RUNTIMES
from ..core.errors import InvalidRequest
from ..core.model import PRIORITY_MAX, PRIORITY_MIN
from ..core.units import format_duration, parse_duration

BANDS = {"low": (1, 100), "medium": (101, 200), "high": (201, 300)}
COUNT_MAX = 100_000

HELP = """\
%egs: ask for GPUs and watch them from a notebook (egs-hub).

  %egs request N gpus|nodes for DURATION [options] [--wait]
        Submit a GPU Provision Request (GPR), e.g. %egs request 2 gpus for 2h --shape H100;
        N below 1 asks for that share of a time-sliced GPU (%egs request 0.25 gpu for 2h), where
        your slice allows sharing.
        --wait blocks until it is provisioned (as %egs wait does).
  %egs request --template NAME [N gpus|nodes] [for DURATION] [options] [--wait]
        The same from a GPR template: what you leave out is the template's.
  %egs wait-times N gpus|nodes for DURATION [options]    (or --template NAME, as request)
        When a GPR like that would start, on every shape and cluster that could serve it.
  %egs templates
        The GPR templates your slice may use (--slice NAME: that slice's).
  %egs status
        Your slices' GPRs that are not finished: status, queue position, estimated start, time left.
  %egs release [ID]
        End GPR ID early (a GPR still waiting is cancelled); without ID, your only live GPR.
  %egs wait [ID]
        Wait with a progress bar until GPR ID (without ID, your only waiting GPR) is provisioned.
        Ctrl-C stops waiting; the GPR stays as it is.
  %egs gpus
        The GPUs of your slices: utilisation, memory, temperature, power, hottest first.
  %egs serve MODEL [--runtime vllm|kserve] [--gpus N] [--name NAME] [--min N] [--max N] [--idle DURATION]
  %egs serve --runtime command --name NAME [options] -- COMMAND WITH {port} ...
        Serve a model (a Hugging Face id, or a path here) from your slice's GPUs at an
        authenticated URL; each replica is a GPR of N GPUs (default 1), between --min (default 0)
        and --max (default 1) replicas on the load, none after --idle (default 15m) without a
        request. It waits with a progress bar until one replica is ready (--no-wait: it does not),
        then says the URL and how to call it. --runtime kserve serves MODEL (a Hugging Face id,
        or a storage URI) with KServe's Hugging Face runtime on a Kubernetes cluster with KServe.
        --cluster NAME runs it on that cluster (default: the service picks); --image IMAGE runs it
        in that container image (on Kubernetes; the command runtime there needs one).
  %egs endpoints
        Your slices' endpoints: status, replicas, requests/s, latency, errors, URL (--slice NAME).
  %egs --help
        This text.

Options of request and wait-times:
  --template NAME      a GPR template (%egs templates lists them): it gives what is left out
  --shape SHAPE        a GPU model or shape name, e.g. H100 or "H100-80GB x8" (default: any);
                       MIG instances by GPU type and profile, "H100-80GB 1g.10gb" (N gpus: N of them)
  --priority P         low (1), medium (101) or high (201): the lowest priority of that band,
                       or a number from 1 to 300 up to your slice's max (default: 101, medium)
  --slice NAME         the slice (workspace); default: $EGS_SLICE, else your only slice
  --start-after TIME   not before TIME: HH:MM (local, the next one), +DURATION (from now),
                       or ISO-8601 like 2026-11-22T14:00 (local unless it has a zone)

DURATION is whole seconds, units largest first (2h, 90m, 1d2h30m) or words (2 hours 30 min).
The service is $EGS_API_URL with the token $EGS_API_TOKEN (else $JUPYTERHUB_API_TOKEN)."""

OPTIONS = {"--shape", "--priority", "--slice", "--start-after", "--template"}


class CommandError(ValueError):
    """The line is not a command; the message says what is wrong, in one line."""


@dataclass(frozen=True)
class Ask:
    """What request and wait-times share: a count of GPUs or nodes, for how long, and the options.
    With a ``template`` the count (and unit) and the duration may be None: the template's."""

    count: int | None
    unit: str | None  # "gpus" or "nodes"
    duration: timedelta | None
    share: float | None = None  # a share of one time-sliced GPU (N below 1 gpus); count is then None
    template: str | None = None
    shape: str | None = None
    priority: int | str | None = None  # a number, or a band name resolved against the slice
    slice: str | None = None
    start_after: datetime | None = None


@dataclass(frozen=True)
class Request:
    ask: Ask
    wait: bool = False


@dataclass(frozen=True)
class WaitTimes:
    ask: Ask


@dataclass(frozen=True)
class Status:
    pass


@dataclass(frozen=True)
class Release:
    gpr_id: int | None = None


@dataclass(frozen=True)
class Wait:
    gpr_id: int | None = None


@dataclass(frozen=True)
class Gpus:
    pass


@dataclass(frozen=True)
class Templates:
    slice: str | None = None


@dataclass(frozen=True)
class Serve:
    """``%egs serve``: ``model`` (a path as given) for vllm and kserve, ``command`` (after ``--``) for the command
    runtime; ``cluster`` None: the service picks; ``image``: the container image on Kubernetes."""

    model: str
    runtime: str = "vllm"
    name: str | None = None
    gpus: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    idle_timeout: timedelta | None = None
    slice: str | None = None
    cluster: str | None = None
    image: str | None = None
    command: tuple[str, ...] = ()
    wait: bool = True


@dataclass(frozen=True)
class Endpoints:
    slice: str | None = None


@dataclass(frozen=True)
class Help:
    pass


Command = Request | WaitTimes | Status | Release | Wait | Gpus | Templates | Serve | Endpoints | Help
SERVE_OPTIONS = {"--runtime", "--name", "--gpus", "--min", "--max", "--idle", "--slice", "--cluster", "--image"}


def parse_command(line: str, now: datetime) -> Command:
    """The command ``line`` names; ``now`` (aware) anchors --start-after times."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise CommandError(f"cannot split the line into words: {e}") from None
    if not words or words[0] in ("--help", "-h", "help") or "--help" in words or "-h" in words:
        return Help()
    name, rest = words[0], words[1:]
    if name == "request":
        wait = "--wait" in rest
        return Request(_parse_ask(name, [w for w in rest if w != "--wait"], now), wait=wait)
    if name == "wait-times":
        return WaitTimes(_parse_ask(name, rest, now))
    if name in ("status", "gpus"):
        if rest:
            raise CommandError(f"%egs {name} takes no arguments, not {' '.join(rest)!r}")
        return Status() if name == "status" else Gpus()
    if name in ("release", "wait"):
        gpr_id = _parse_id(name, rest)
        return Release(gpr_id) if name == "release" else Wait(gpr_id)
    if name == "templates":
        positional, options = _split_options(name, rest, allowed={"--slice"})
        if positional:
            raise CommandError(f"%egs templates takes only --slice NAME, not {' '.join(positional)!r}")
        return Templates(options.get("--slice"))
    if name == "serve":
        return _parse_serve(words[1:])
    if name == "endpoints":
        positional, options = _split_options(name, rest, allowed={"--slice"})
        if positional:
            raise CommandError(f"%egs endpoints takes only --slice NAME, not {' '.join(positional)!r}")
        return Endpoints(options.get("--slice"))
    raise CommandError(
        f"unknown command {name!r}; commands: request, wait-times, templates, status, release, wait, gpus, serve, "
        "endpoints (%egs --help)"
    )


def _parse_serve(words: list[str]) -> Serve:
    command: list[str] = []
    if "--" in words:
        at = words.index("--")
        words, command = words[:at], words[at + 1 :]
    wait = "--no-wait" not in words
    positional, options = _split_options("serve", [w for w in words if w != "--no-wait"], allowed=SERVE_OPTIONS)
    runtime = options.get("--runtime", "command" if command else "vllm")
    if runtime not in RUNTIMES:
        raise CommandError(f"--runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if len(positional) > 1:
        raise CommandError(f"%egs serve takes one MODEL, not {' '.join(positional)!r}")
    model = positional[0] if positional else ""
    if runtime == "command" and not command:
        raise CommandError("--runtime command needs the server's command after --, like -- python serve.py {port}")
    if runtime != "command" and not model:
        raise CommandError(
            f"%egs serve{' --runtime kserve' if runtime == 'kserve' else ''} needs a MODEL: a Hugging Face id like "
            "Qwen/Qwen2.5-0.5B-Instruct, or a path"
        )
    if command and runtime != "command":
        raise CommandError(
            f"a command after -- is for --runtime command, not {runtime} (which serves MODEL itself); "
            "to run your own server in an image, use --runtime command --image IMAGE -- COMMAND"
        )
    name = options.get("--name") or endpoint_name(model or command[0])
    return Serve(
        model=model,
        runtime=runtime,
        name=name,
        gpus=_count(options, "--gpus", 1),
        min_replicas=_count(options, "--min", 0),
        max_replicas=_count(options, "--max", 1),
        idle_timeout=parse_duration_text(options["--idle"]) if "--idle" in options else None,
        slice=options.get("--slice"),
        cluster=options.get("--cluster"),
        image=options.get("--image"),
        command=tuple(command),
        wait=wait,
    )


def _count(options: dict[str, str], option: str, least: int) -> int | None:
    if option not in options:
        return None
    text = options[option]
    if not text.isdigit() or not least <= int(text) <= 100:
        raise CommandError(f"{option} must be a whole number from {least} to 100, not {text!r}")
    return int(text)


def endpoint_name(model: str) -> str:
    """An endpoint's name from what it serves: its last path part, in lower case, other characters as '-'."""
    base = model.rstrip("/").rsplit("/", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9]+", "-", base).strip("-")[:63].strip("-")
    return name or "endpoint"


def _parse_id(name: str, rest: list[str]) -> int | None:
    if not rest:
        return None
    if len(rest) > 1:
        raise CommandError(f"%egs {name} takes at most one GPR id, not {' '.join(rest)!r}")
    text = rest[0].removeprefix("#")
    if not text.isdigit() or not 0 < int(text) < 2**31:
        raise CommandError(f"%egs {name}: {rest[0]!r} is not a GPR id (a whole number like 12)")
    return int(text)


def _parse_ask(name: str, words: list[str], now: datetime) -> Ask:
    positional, options = _split_options(name, words)
    template = options.get("--template")
    usage = f"%egs {name} N gpus|nodes for DURATION, e.g. %egs {name} 2 gpus for 2h"
    if template is not None:
        usage += f", or %egs {name} --template NAME [N gpus|nodes] [for DURATION]"
    size, duration_words = positional, []
    if "for" in (word.lower() for word in positional):
        at = [word.lower() for word in positional].index("for")
        size, duration_words = positional[:at], positional[at + 1 :]
        if not duration_words:
            raise CommandError(f"'for' needs a duration; expected {usage}")
    if (template is None and (len(size) != 2 or not duration_words)) or len(size) not in (0, 2):
        given = " ".join(positional) or "nothing"
        raise CommandError(f"expected {usage}; got {given!r}")
    count, unit, share = None, None, None
    if size:
        count_text, unit_text = size
        unit = unit_text.lower()
        if unit not in ("gpu", "gpus", "node", "nodes"):
            raise CommandError(f"{unit_text!r} is not gpus or nodes; expected {usage}")
        share = _share(count_text) if unit.startswith("gpu") else None
        if share is None and (not count_text.isdigit() or not 0 < int(count_text) <= COUNT_MAX):
            raise CommandError(
                f"the count {count_text!r} must be a whole number from 1 to {COUNT_MAX} (or, of gpus, a share "
                "between 0 and 1 like 0.25)"
            )
        count, unit = (
            (None, None) if share is not None else (int(count_text), "gpus" if unit.startswith("gpu") else "nodes")
        )
    return Ask(
        count=count,
        unit=unit,
        share=share,
        duration=parse_duration_text(" ".join(duration_words)) if duration_words else None,
        template=template,
        shape=options.get("--shape"),
        priority=None if "--priority" not in options else parse_priority(options["--priority"]),
        slice=options.get("--slice"),
        start_after=None if "--start-after" not in options else parse_start_after(options["--start-after"], now),
    )


def _share(text: str) -> float | None:
    """A count like "0.25": that share of a GPU; None for anything else."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < 1 and not text.isdigit() else None


def describe(ask: Ask) -> str:
    """``2 gpus for 2h``, ``template big for 1h``, ``0.25 of a gpu for 1h``: what an ask asks for, in words."""
    parts = [f"template {ask.template}"] if ask.template else []
    if ask.share is not None:
        parts.append(f"{ask.share:g} of a gpu")
    if ask.count is not None:
        parts.append(f"{ask.count} {ask.unit if ask.count != 1 else ask.unit[:-1]}")
    if ask.duration is not None:
        parts.append(f"for {format_duration(ask.duration)}")
    return " ".join(parts)


def _split_options(name: str, words: list[str], allowed: set[str] = OPTIONS) -> tuple[list[str], dict[str, str]]:
    positional: list[str] = []
    options: dict[str, str] = {}
    words = list(words)
    while words:
        word = words.pop(0)
        if not word.startswith("--"):
            positional.append(word)
            continue
        option, has_value, value = word.partition("=")
        if option not in allowed:
            known = ", ".join(sorted(allowed | ({"--wait"} if name == "request" else set())))
            raise CommandError(f"unknown option {option} for %egs {name}; options: {known}")
        if option in options:
            raise CommandError(f"{option} is given more than once")
        if not has_value:
            if not words or words[0].startswith("--"):
                raise CommandError(f"{option} needs a value")
            value = words.pop(0)
        if not value.strip():
            raise CommandError(f"{option} needs a value")
        options[option] = value.strip()
    return positional, options


UNIT_WORDS = {
    "w": ("w", "week", "weeks"),
    "d": ("d", "day", "days"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "m": ("m", "min", "mins", "minute", "minutes"),
    "s": ("s", "sec", "secs", "second", "seconds"),
}
UNIT_OF_WORD = {word: unit for unit, words in UNIT_WORDS.items() for word in words}
_AMOUNT_RE = re.compile(r"\s*([0-9]+)\s*([a-zA-Z]+)\s*")


def compact_duration(text: str) -> str:
    """ "2 hours 30 minutes" as the service's "2h30m"; text that is not amounts with units is left as it is."""
    amounts = list(_AMOUNT_RE.finditer(text))
    if not amounts or "".join(m[0] for m in amounts) != text:
        return text.strip()
    units = [UNIT_OF_WORD.get(m[2].lower()) for m in amounts]
    if None in units:
        return text.strip()
    return "".join(f"{m[1]}{unit}" for m, unit in zip(amounts, units, strict=True))


def parse_duration_text(text: str) -> timedelta:
    """A duration as the service reads it ("2h30m", "90"), or in words ("2 hours 30 min")."""
    return _duration(compact_duration(text), "the duration")


def _duration(text: str, what: str) -> timedelta:
    try:
        return parse_duration(text, what)
    except InvalidRequest as e:
        raise CommandError(str(e)) from None


def parse_priority(text: str) -> int | str:
    """A band name (lower case) or a priority number."""
    band = text.lower()
    if band in BANDS:
        return band
    if not re.fullmatch(r"[0-9]+", text) or not PRIORITY_MIN <= int(text) <= PRIORITY_MAX:
        raise CommandError(
            f"--priority {text!r} must be low, medium, high or a number from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return int(text)


def band_priority(band: str, max_priority: int) -> int:
    """The lowest priority of ``band``, the one the API gives by default in medium: a band name puts a GPR
    in that band without jumping others of it (within a band, fair share then priority order the queue)."""
    low, high = BANDS[band]
    if max_priority < low:
        allowed = [name for name, (start, _) in BANDS.items() if start <= max_priority]
        raise CommandError(
            f"--priority {band} ({low}-{high}) is above your slice's max_priority {max_priority}; "
            f"use {' or '.join(allowed)}, or a number up to {max_priority}"
        )
    return low


def parse_start_after(text: str, now: datetime) -> datetime:
    """HH:MM (the next such local time), +DURATION (from ``now``), or ISO-8601 (``now``'s zone if none)."""
    zone: tzinfo = now.tzinfo
    if text.startswith("+"):
        return now + _duration(text[1:], "--start-after +DURATION")
    clock = re.fullmatch(r"([01]?[0-9]|2[0-3]):([0-5][0-9])", text)
    if clock:
        at = datetime.combine(now.date(), time(int(clock[1]), int(clock[2])), zone)
        return at if at > now else at + timedelta(days=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(
            f"--start-after {text!r} is not a time: use HH:MM (local), +30m, or ISO-8601 like 2026-11-22T14:00"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)


def choose_slice(given: str | None, from_environment: str | None, member_of: Sequence[str] | None) -> str:
    """--slice, else $EGS_SLICE, else the caller's only slice (``member_of``, listed only when needed)."""
    if given:
        return given
    if from_environment:
        return from_environment
    if member_of is None:
        raise ValueError("member_of is needed when neither --slice nor EGS_SLICE names a slice")
    if len(member_of) == 1:
        return member_of[0]
    if not member_of:
        raise CommandError("you are a member of no slice; ask an egs-hub admin to add you to one")
    raise CommandError(
        f"you are a member of several slices ({', '.join(member_of)}); pick one with --slice NAME or set EGS_SLICE"
    )


def pick_gpr(gprs: Sequence[GPR], statuses: Sequence[str], user: str | None, command: str) -> GPR:
    """The one GPR of ``user`` (anyone's when None) in one of ``statuses`` that ``%egs command`` means."""
    mine = [g for g in gprs if g.status in statuses and (user is None or g.requested_by == user)]
    whose = f"{user} has" if user else "your slices have"
    if len(mine) == 1:
        return mine[0]
    if not mine:
        raise CommandError(f"{whose} no GPR that is {' or '.join(statuses)}; %egs status lists them")
    ids = ", ".join(str(g.id) for g in mine)
    raise CommandError(f"{whose} several such GPRs ({ids}); say which: %egs {command} {mine[0].id}")
