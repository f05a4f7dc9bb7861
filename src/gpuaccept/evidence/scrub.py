"""Credentials out of free text (issue #31 §5, #49 §7): whatever gpuaccept hands to a vendor (a
kernel log, `nvidia-smi -q`, NVIDIA's bug report, which copies files from every home directory)
passes here.

The detector is detect-secrets (Yelp; PyPI `detect-secrets`, pure Python, offline), every plugin
it ships (`core.plugins.util.get_mapping_from_secret_type_to_class`, as its own
`settings.default_settings` enables them: AWS, Azure, Artifactory, basic auth in URLs, Cloudant,
Discord, GitHub, GitLab, IBM, JWT, keywords, Mailchimp, npm, OpenAI, private keys, PyPI,
SendGrid, Slack, SoftLayer, Square, Stripe, Telegram, Twilio, public IP addresses, and
high-entropy base64 and hex strings), plus `evidence.secret_forms`, the forms it does not know
(netrc, registry auth, kubeconfig, Hugging Face, command lines, `*_TOKEN=`, Authorization, URL
queries), written as detect-secrets plugins. How it is used, and why:

- Line by line, each plugin's `analyze_line` (plugins/base.py), as detect-secrets' own file scan
  does (core/scan.py, `_process_line_based_plugins`). Its ad-hoc `scan_line` is not used: it
  turns on "eager" search, which reports every word of a line as a high-entropy candidate
  (plugins/high_entropy_strings.py, `analyze_line`).
- No verification: detect-secrets verifies a secret against its service (an HTTP request) only
  while the filter `common.is_ignored_due_to_verification_policies` is configured
  (plugins/base.py, `analyze_line`); the scan runs under `transient_settings` with no filters
  beyond its two defaults, so nothing leaves the node.
- The keyword plugin reads each line twice: as a config file (`key: value` unquoted) and as
  code (quoted values): its patterns depend on the file name's extension (plugins/keyword.py,
  `REGEX_BY_FILETYPE`), and a bug report is both.
- detect-secrets' heuristic filters (docs/filters.md) are applied to its guesses only (the
  high-entropy plugins' findings and public IP addresses): `is_potential_uuid` (GPU-/MIG- UUIDs
  stay), `is_sequential_string`, `is_likely_id_string` (`machine_id`, `uuid` fields stay),
  `is_not_alphanumeric_string`, and one of ours, a value its line names as a digest or a version
  (a git commit, a lock file's sha256, a 4-part version such as `0.11.0.1`, which is a dotted
  quad to the IP plugin). A finding of a named form (a keyword, a prefix, a format) goes
  whatever it looks like. Inline
  allowlisting (`pragma: allowlist secret`) is not honoured: a file on the node cannot exempt
  itself from the vendor's copy.
- A finding is removed where it stands in the line, widened to the whole token around it: the JWT
  plugin's pattern stops before the signature and the OpenAI one 4 characters short; a fragment
  of a secret left beside `[REDACTED]` is still a secret (and the GitHub plugin reports only
  the `ghp` of `ghp_...`: its pattern's one group is the prefix). A value under 8 characters is
  widened only from the start of a token, and a value under 3 is removed only where it stands as
  a whole token, so `password: 1` does not blank every `1` of the line.
- A private key goes whole: detect-secrets reports the `BEGIN ... PRIVATE KEY` line
  (plugins/private_key.py), the key is the lines after it, up to its `-----END` line or a PuTTY
  file's `Private-MAC:` line (or the end of the text, when it was cut).

What stays, because the vendor needs it and none of it is a credential: GPU and MIG UUIDs,
serials, part numbers, PCI addresses and ids (`0000:cb:00.0`, `[10de:2335]`), hex addresses
(`0x7f3a9b2c4d10`), XID lines, versions, private IP addresses. Public IP addresses go
(detect-secrets' IPPublicDetector). A bare random string with no key, prefix or quotes is not
found: nothing tells it from a digest or an address, and detect-secrets judges entropy only in
quotes ("We require quoted strings to reduce noise", plugins/high_entropy_strings.py).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import version

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import (
    is_likely_id_string,
    is_not_alphanumeric_string,
    is_potential_uuid,
    is_sequential_string,
)
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.settings import transient_settings

from gpuaccept.evidence.secret_forms import FORMS

REDACTED = "[REDACTED]"
# Characters a token is made of: a finding is widened over them (base64, base64url, hex, JWT's
# dots, paths); `=`, `:`, `@` and quotes end it, so `KEY=` and `user:` stay.
_TOKEN = re.compile(r"[A-Za-z0-9_\-.+/~%]*")
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-.+/~%]")
_KEY_START = re.compile(r"-*BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-*|PuTTY-User-Key-File-\d+")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*-----|^Private-MAC:")
_PRIVATE_KEY = PrivateKeyDetector.secret_type
# A digest or a version named as such before the value: a git commit, a lock file's sha256,
# `"version": "0.11.0.1"` (a 4-part version is a dotted quad to IPPublicDetector), `Driver
# Version: ...`. Letters may not touch the word (`shared` is no `sha`).
_NOT_SECRET = re.compile(
    r"(?i)(?<![a-z])(?:sha(?:1|256|384|512)?|md5|digest|hash|checksum|version)(?![a-z])"
)
_GUESSES = (HighEntropyStringsPlugin, IPPublicDetector)
_SHORT = 8
_PREFIX = 3
_CACHED_LINES = 100_000  # a log repeats itself: a line seen before costs a dictionary look-up
_CHECK_EVERY = 256  # lines between two looks at the clock


@dataclass
class Scrubbed:
    """A text without credentials: how many were taken out, of which kinds (detect-secrets'
    `secret_type`, or a form's), and where it stops when it ran past its deadline."""

    text: str
    count: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    stopped_at: int | None = None  # characters of the input scrubbed before the deadline


@lru_cache(maxsize=1)
def _plugins() -> tuple[BasePlugin, ...]:
    """Every plugin detect-secrets ships, then the forms it does not know."""
    shipped: list[type[BasePlugin]] = list(get_mapping_from_secret_type_to_class().values())
    return tuple(plugin() for plugin in (*shipped, *FORMS))


def detector() -> str:
    """The detector and its version, as the archive's manifest names it."""
    return f"detect-secrets {version('detect-secrets')}"


def plugin_types() -> list[str]:
    """The `secret_type` of every plugin the scrubber runs, in order (for the manifest)."""
    return [p.secret_type for p in _plugins()]


def _guess_kept(secret: str, line: str, plugin: BasePlugin) -> bool:
    """Whether a guess is no secret: a value its line names as a digest or a version before it
    (ours), or, for a high-entropy string, detect-secrets' heuristic filters
    (`is_not_alphanumeric_string` would keep every IP address: it asks for a letter)."""
    if _NOT_SECRET.search(line, 0, max(line.find(secret), 0)):
        return True
    return isinstance(plugin, HighEntropyStringsPlugin) and (
        is_potential_uuid(secret)
        or is_sequential_string(secret)
        or is_not_alphanumeric_string(secret)
        or is_likely_id_string(secret, line, plugin)
    )


def _findings(line: str) -> list[tuple[str, str]]:
    """(secret_type, value) of every credential in one line, by every plugin."""
    found: list[tuple[str, str]] = []
    for plugin in _plugins():
        # the keyword plugin's patterns follow the file name's extension: read as both
        names = ("evidence.conf", "evidence.py") if isinstance(plugin, KeywordDetector) else ("",)
        for name in names:
            for secret in plugin.analyze_line(filename=name, line=line, line_number=0):
                value = secret.secret_value
                if not value or not value.replace(REDACTED, "").strip("\"' "):
                    continue  # nothing, or what an earlier pass took out (`password: [REDACTED]`)
                if isinstance(plugin, _GUESSES) and _guess_kept(value, line, plugin):
                    continue
                found.append((plugin.secret_type, value))
    return found


def _token_length(text: str, at: int) -> int:
    """How many token characters stand in `text` from `at` on."""
    found = _TOKEN.match(text, at)
    return len(found.group(0)) if found else 0


def _spans(line: str, values: list[str]) -> list[tuple[int, int]]:
    """Where each value stands in the line, widened to its whole token, merged."""
    spans: list[tuple[int, int]] = []
    for value in set(values):
        start = line.find(value)
        while start >= 0:
            end = start + len(value)
            opens = start == 0 or not _TOKEN_CHAR.match(line[start - 1])
            closes = end == len(line) or not _TOKEN_CHAR.match(line[end])
            # a long value, or a short one that opens a token (GitHub's plugin reports `ghp` of
            # `ghp_...`: its pattern's group is the prefix), is widened to the whole token
            if (opens and closes) or len(value) >= _SHORT or (opens and len(value) >= _PREFIX):
                left = start - _token_length(line[::-1], len(line) - start)
                right = end + _token_length(line, end)
                spans.append((left, right))
            start = line.find(value, end)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _redact(line: str, spans: list[tuple[int, int]]) -> str:
    for start, end in reversed(spans):
        line = line[:start] + REDACTED + line[end:]
    return line


def _clean_line(line: str) -> tuple[str, int, set[str], bool]:
    """(the line without credentials, how many, of which kinds, whether a private key opened on
    it goes on past it)."""
    found = _findings(line)
    spans = _spans(line, [value for _, value in found])
    key_open = False
    opened = _KEY_START.search(line) if any(k == _PRIVATE_KEY for k, _ in found) else None
    if opened is not None:
        # the key from its header to its end line, or on: a key quoted in JSON is one line
        # (`"-----BEGIN ... KEY-----\\nMIIE...\\n-----END ... KEY-----"`)
        closed = _KEY_END.search(line, opened.end())
        key_open = closed is None
        key = (opened.start(), closed.end() if closed else len(line))
        spans = [s for s in spans if s[1] <= key[0] or s[0] >= key[1]]
        spans = sorted([*spans, key])
    kinds = {kind for kind, _ in found} if spans else set()
    return _redact(line, spans), len(spans), kinds, key_open


def scrub(
    text: str, deadline: float | None = None, clock: Callable[[], float] = time.monotonic
) -> Scrubbed:
    """`text` without credentials. With a `deadline` (on `clock`), a text not scrubbed by then is
    cut at the last line scrubbed (`stopped_at`): what was not read is never passed on."""
    out: list[str] = []
    result = Scrubbed("")
    cache: dict[str, tuple[str, int, set[str], bool]] = {}
    in_key = False
    done = 0
    with transient_settings({"plugins_used": [], "filters_used": []}):
        for number, line in enumerate(text.splitlines(keepends=True)):
            if deadline is not None and number % _CHECK_EVERY == 0 and clock() > deadline:
                result.stopped_at = done
                break
            done += len(line)
            body = line.rstrip("\r\n")
            if in_key:  # inside a private key: the whole line goes
                in_key = not _KEY_END.search(body)
                out.append(REDACTED + line[len(body) :] if body else line)
                continue
            clean = cache.get(body)
            if clean is None:
                clean = _clean_line(body)
                if len(cache) < _CACHED_LINES:
                    cache[body] = clean
            redacted, count, kinds, in_key = clean
            result.count += count
            result.kinds.update(kinds)
            out.append(redacted + line[len(body) :])
    result.text = "".join(out)
    return result


def scrub_text(text: str) -> tuple[str, int]:
    """`text` without credentials, and how many were taken out."""
    done = scrub(text)
    return done.text, done.count
