"""Credential forms detect-secrets (Yelp, 1.5.0) does not know, written as its own plugins
(`RegexBasedDetector`: a `secret_type` and a `denylist` of compiled patterns whose groups are the
secret; detect-secrets docs/plugins.md, "Writing Your Own Plugin"), so that `evidence.scrub` runs
them beside its built-in ones (issue #49 §7: of 12 forms planted in an evidence archive, 8 came
through the scrubber it replaces).

Each form, and where it is written down:
- `.netrc`: tokens "separated by spaces, tabs, or new-lines", `password string` and `account
  string` (netrc(5), inetutils-ftp's manual page); no `=` or `:`, so no keyword rule sees it.
- a container registry's `auth`: "an auth token in the form of a base64 encoded string from the
  concatenation of the username, a colon, and the password" (containers-auth.json(5), the format
  of docker's config.json `auths`), plus docker's `identitytoken` and `registrytoken`.
- a kubeconfig user: `client-key-data` (PEM key, base64), `token`, `password`, and an auth
  provider's `id-token`, `refresh-token`, `access-token` (kubernetes/client-go,
  tools/clientcmd/api/v1/types.go, `AuthInfo`: `client-key-data` is tagged
  `datapolicy:"security-key"`, `token` `datapolicy:"token"`).
- a Hugging Face token: `hf_` and 34 letters (gitleaks, cmd/generate/config/rules/huggingface.go:
  `hf_(?i:[a-z]{34})`), and its organisation form `api_org_`; taken here from 30 letters or
  digits, as trufflehog's detector does, erring on the side of removing.
- a secret on a command line (`ps`, `/proc/*/cmdline` in NVIDIA's bug report): `--password X`,
  `--password=X`, and the same for token, secret, api-key, access-key, passphrase options.
- a key named for a credential with a value (`MY_TOKEN=abc`, `X-API-Key: abc`, `api key: abc`):
  detect-secrets' KeywordDetector has no `token`, `auth` or spaced `api key` in its DENYLIST
  (plugins/keyword.py); the key must end in the word, so `tokens_per_second: 25000` stays.
- the same keys followed by a value with only white space between (`api key 3q2x...`), the value
  holding letters and digits, 8 characters or more.
- an HTTP `Authorization:` header's credentials (RFC 9110 §11.6.2) and a bearer token
  (RFC 6750 §2.1: `b64token`).
- a URL's query (`?access_token=`, Azure's `sig=`): detect-secrets' BasicAuthDetector takes the
  password of `user:password@`; the query goes whole, as `environment.strip_credentials` does.
"""

from __future__ import annotations

import re

from detect_secrets.plugins.base import RegexBasedDetector

# A value: quoted (up to the closing quote) or bare (up to white space or a separator).
_VALUE = r"""(?:"([^"\n]*)"|'([^'\n]*)'|([^\s"',;{}\[\]]+))"""


class NetrcPassword(RegexBasedDetector):
    secret_type = "netrc password"
    denylist = (re.compile(r"(?:^|\s)(?:password|account)[ \t]+(\S+)"),)


class RegistryAuth(RegexBasedDetector):
    secret_type = "Container registry auth"
    denylist = (
        re.compile(r"""(?i)["']?\b(?:auth|identitytoken|registrytoken)["']?\s*:\s*""" + _VALUE),
    )


class KubeconfigCredential(RegexBasedDetector):
    secret_type = "Kubeconfig credential"
    denylist = (
        re.compile(
            r"""(?i)["']?\b(?:client-key-data|id-token|refresh-token|access-token|token)["']?"""
            r"""\s*:\s*""" + _VALUE
        ),
    )


class HuggingFaceToken(RegexBasedDetector):
    secret_type = "Hugging Face token"
    denylist = (re.compile(r"\b((?:hf_|api_org_)[A-Za-z0-9]{30,})"),)


class CommandLineSecret(RegexBasedDetector):
    secret_type = "Secret on a command line"
    denylist = (
        re.compile(
            r"(?i)(?:^|\s)--?[\w-]*(?:password|passwd|passphrase|secret|token|api-?key"
            r"|access-?key)(?:=|[ \t]+)" + _VALUE
        ),
    )


class CredentialAssignment(RegexBasedDetector):
    secret_type = "Credential assignment"
    denylist = (
        re.compile(
            r"(?i)\b[\w.-]*(?:password|passwd|passphrase|secret|token|auth|credentials?"
            r"|api[ _-]?key|access[ _-]?key|private[ _-]?key)[\"']?[ \t]*[:=][ \t]*" + _VALUE
        ),
    )


class SpacedCredential(RegexBasedDetector):
    """`api key 3q2x7WkL...`, `token Zx8Yw7...`: a key and its value with only white space
    between, as a log line prints them; the value must look like one (8 characters or more,
    letters and digits both), so `token ring` in prose stays."""

    secret_type = "Credential after its name"
    denylist = (
        re.compile(
            r"(?i)\b(?:api[ _-]?key|access[ _-]?key|secret[ _-]?key|token|secret|passphrase)"
            r"[ \t]+(?:is[ \t]+)?((?=[^\s\"',;]*\d)(?=[^\s\"',;]*[A-Za-z])[^\s\"',;]{8,})"
        ),
    )


class AuthorizationHeader(RegexBasedDetector):
    secret_type = "Authorization header"
    denylist = (
        re.compile(r"(?i)\bauthorization\s*[:=]\s*(?:[a-z][\w-]*\s+)?([^\s\"',;]+)"),
        re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{8,}=*)"),
    )


class UrlQuery(RegexBasedDetector):
    secret_type = "URL query"
    denylist = (re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>?#]+[?#]([^\s\"'<>]+)"),)


FORMS: tuple[type[RegexBasedDetector], ...] = (
    NetrcPassword,
    RegistryAuth,
    KubeconfigCredential,
    HuggingFaceToken,
    CommandLineSecret,
    CredentialAssignment,
    SpacedCredential,
    AuthorizationHeader,
    UrlQuery,
)
