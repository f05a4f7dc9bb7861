"""Credentials out of free text (issue #31 §5, record.scrub): every kind the scrubber knows is
taken out with its value, and what a vendor needs (serials, XID lines, figures) is left as it is."""

from __future__ import annotations

import pytest

from gpuaccept.record.scrub import REDACTED, scrub_text

XID_LINE = "[  100.000000] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus."


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("Authorization: Bearer eyJhbGciOi.x.y", "Authorization: Bearer", "eyJhbGciOi"),
        ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY=", "wJalr"),
        ('db_password: "hunter two"', "db_password:", "hunter two"),
        ("HF_TOKEN=hf_abcdefghijklmnop", "HF_TOKEN=", "hf_abcdef"),
        ("api-key = 12345", "api-key =", "12345"),
        ("remote https://alice:s3cret@git.example.com/x.git", "git.example.com/x.git", "s3cret"),
        ("id AKIAIOSFODNN7EXAMPLE here", "id ", "AKIAIOSFODNN7EXAMPLE"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123 token", "", "ghp_abcdefghij"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----",
            "",
            "b3BlbnNzaA",
        ),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEcut off", "", "MIIE"),  # a cut block, still gone
    ],
)
def test_each_kind_of_credential_is_scrubbed(text: str, kept: str, gone: str) -> None:
    clean, count = scrub_text(text)
    assert gone not in clean
    assert REDACTED in clean
    assert kept in clean
    assert count == 1


def test_what_the_vendor_needs_is_left_as_it_is() -> None:
    text = "\n".join(
        [
            XID_LINE,
            "    Serial Number                         : 1652823051234",
            "    Board Part Number                     : 692-2G520-0200-000",
            "tokens_per_second 25000",
            "https://docs.nvidia.com/deploy/xid-errors/index.html",
        ]
    )
    assert scrub_text(text) == (text, 0)


def test_every_credential_is_counted() -> None:
    text = "\n".join(
        [
            "-----BEGIN RSA PRIVATE KEY-----\nAAA\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----\nBBB\n-----END EC PRIVATE KEY-----",
            "https://a:b@x.example/ https://c:d@y.example/",
            "Authorization: Bearer one",
            "authorization: Basic two",
            "password=p1 secret=s1",
            "AKIAIOSFODNN7EXAMPLE ASIAIOSFODNN7EXAMPL2",
        ]
    )
    clean, count = scrub_text(text)
    assert count == 10  # two of each of five kinds
    assert clean.count(REDACTED) == 10
