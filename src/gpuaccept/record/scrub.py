"""Credentials out of free text (issue #31 §5): whatever gpuaccept hands to a vendor (a kernel log,
`nvidia-smi -q`, NVIDIA's bug report, which copies files from every home directory) passes here.

What is taken out, each replaced by `[REDACTED]`:
- a URL's user:password@ and its query (`environment.strip_credentials`, as the capture does);
- `password`, `passwd`, `secret`, `token`, `api_key`, `access_key` and their spellings, followed
  by `=` or `:` and a value (environment dumps, config files, command lines);
- an HTTP `Authorization:` header's credentials (Bearer, Basic);
- AWS access key ids (AKIA/ASIA + 16 characters: AWS IAM's "unique identifiers" documentation)
  and GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_: GitHub's "About authentication",
  token formats);
- PEM private key blocks, whole.
A scrubber errs on the side of removing: a value that only looks like a secret is removed too.
"""

from __future__ import annotations

import re

from gpuaccept.record.environment import strip_credentials

REDACTED = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)
_AUTHORIZATION = re.compile(r"(?i)(\bauthorization\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?)\S+")
_KEY_VALUE = re.compile(
    r"(?i)(\b[\w.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key)"
    r"[\w.-]*\b[\"']?\s*[:=]\s*)(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;]+)"
)
_TOKENS = re.compile(
    r"\b(?:(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"
)


def scrub_text(text: str) -> tuple[str, int]:
    """`text` without credentials, and how many were taken out."""
    count = 0

    def whole(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return REDACTED

    def value(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"{match.group(1)}{REDACTED}"

    def url(match: re.Match[str]) -> str:
        nonlocal count
        kept = strip_credentials(match.group(0))
        if kept == match.group(0):
            return kept
        count += 1
        return f"{kept}{REDACTED}"

    text = _PRIVATE_KEY.sub(whole, text)
    text = _URL.sub(url, text)
    text = _AUTHORIZATION.sub(value, text)
    text = _KEY_VALUE.sub(value, text)
    text = _TOKENS.sub(whole, text)
    return text, count
