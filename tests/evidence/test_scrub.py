"""Credentials out of free text (issues #31 §5 and #49 §7, evidence.scrub): every kind
detect-secrets knows and every form issue #49 planted is taken out with its value, and what a
vendor needs (UUIDs, serials, PCI addresses, XID lines, hex addresses) is left as it is."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.settings import transient_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaccept.evidence.scrub import REDACTED, plugin_types, scrub, scrub_text
from tests.evidence.planted_secrets import DETECTOR_SAMPLES, DIAGNOSTICS, MORE_FORMS, TWELVE_FORMS


def test_a_sample_stands_for_every_plugin_detect_secrets_ships() -> None:
    """Iterating the detector's own plugin list: a plugin added by an upgrade fails here until a
    sample of its secret is planted; each sample is one its plugin really finds."""
    shipped = get_mapping_from_secret_type_to_class()
    assert set(DETECTOR_SAMPLES) == set(shipped)
    for kind, plugin_class in shipped.items():
        line = DETECTOR_SAMPLES[kind][0].splitlines()[0]
        found = plugin_class().analyze_line(filename="x.conf", line=line, line_number=1)
        assert found, f"the {kind} sample is not one its plugin finds"
    assert set(shipped) <= set(plugin_types())


@pytest.mark.parametrize("kind", sorted(DETECTOR_SAMPLES))
def test_every_kind_detect_secrets_knows_is_scrubbed(kind: str) -> None:
    text, secret = DETECTOR_SAMPLES[kind]
    done = scrub(text)
    assert secret not in done.text
    assert REDACTED in done.text
    assert done.count >= 1
    assert kind in done.kinds


@pytest.mark.parametrize(("form", "line", "secret"), TWELVE_FORMS + MORE_FORMS)
def test_every_planted_form_is_scrubbed(form: str, line: str, secret: str) -> None:
    clean, count = scrub_text(line)
    assert secret not in clean, form
    assert count >= 1


def test_the_twelve_forms_of_issue_49_come_through_none_of_them() -> None:
    """The issue's count, kept: 12 forms planted, 0 through (8 of 12 came through before)."""
    through = [form for form, line, secret in TWELVE_FORMS if secret in scrub_text(line)[0]]
    assert len(TWELVE_FORMS) == 12
    assert through == []


def test_what_the_vendor_needs_is_left_as_it_is() -> None:
    text = "\n".join(DIAGNOSTICS) + "\n"
    assert scrub_text(text) == (text, 0)


def test_diagnostics_beside_a_secret_keep_what_is_theirs() -> None:
    """A finding goes with the rest of its token and nothing more: the key before it, the XID
    and the address around it stay."""
    line = "[  101.5] NVRM: Xid (PCI:0008:01:00): 79 MY_TOKEN=abc123 at 0x7f3a9b2c4d10"
    clean, count = scrub_text(line)
    assert (
        clean == f"[  101.5] NVRM: Xid (PCI:0008:01:00): 79 MY_TOKEN={REDACTED} at 0x7f3a9b2c4d10"
    )
    assert count == 1


def test_a_short_value_goes_only_where_it_stands_whole() -> None:
    """In JSON the value ends at its quote (detect-secrets' keyword plugin reads an unquoted
    `password: 1 pid=100` to the end of the line, as a config file's value)."""
    clean, _ = scrub_text('{"password": "1", "pid": 100, "x1": 21}')
    assert clean == f'{{"password": "{REDACTED}", "pid": 100, "x1": 21}}'


def test_a_private_key_goes_whole_even_when_cut() -> None:
    text = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\nAAAA\n"
    text += "-----END OPENSSH PRIVATE KEY-----\nafter\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE"
    clean, count = scrub_text(text)
    assert "b3BlbnNzaA" not in clean
    assert "AAAA" not in clean
    assert "MHcCAQEE" not in clean
    assert clean.splitlines()[0] == "before"
    assert "after" in clean.splitlines()
    assert count == 2


def test_line_ends_and_unchanged_lines_are_kept() -> None:
    text = "a\r\npassword=x1\r\n\r\nz"
    assert scrub_text(text)[0] == f"a\r\npassword={REDACTED}\r\n\r\nz"


def test_each_credential_is_counted_by_kind() -> None:
    text = "\n".join(
        [
            "AKIAZ3Q7XW4RT2LMNPQS and AKIAZ3Q7XW4RT2LMNPQT",
            "https://a:b1@x.example/",
            "Authorization: Bearer one",
            "password=p1",
        ]
    )
    done = scrub(text)
    assert done.count == 5
    assert done.text.count(REDACTED) == 5
    assert done.kinds["AWS Access Key"] == 1  # per line
    assert done.kinds["Basic Auth Credentials"] == 1


def test_scrubbing_past_its_deadline_cuts_the_text_at_the_last_line_it_read() -> None:
    """What was not scrubbed is never passed on: the text stops where the clock ran out."""
    lines = [f"line {i} password={i}x" for i in range(1000)]
    ticks = iter(range(100))
    done = scrub("\n".join(lines), deadline=2.5, clock=lambda: float(next(ticks)))
    # the clock is read every 256 lines: 0, 1 and 2 pass, the fourth reading (3) is late
    assert done.stopped_at == len("\n".join(lines[:768])) + 1
    assert done.text.count("\n") == 768
    assert "password=767x" not in done.text
    assert f"line 767 password={REDACTED}" in done.text
    assert scrub("x", deadline=None).stopped_at is None


def test_nothing_leaves_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """detect-secrets verifies a secret against its service (Slack, Stripe, ...) whenever its
    verification filter is configured, as its command line does: even then, never here."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the scrubber opened a connection")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)  # before any connection: the name
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    text = "\n".join(line for line, _ in DETECTOR_SAMPLES.values())
    verifying = {
        "plugins_used": [],
        "filters_used": [
            {"path": "detect_secrets.filters.common.is_ignored_due_to_verification_policies"}
        ],
    }
    with transient_settings(verifying):
        assert scrub(text).count >= len(DETECTOR_SAMPLES)


def test_scrubbing_twice_finds_nothing_more() -> None:
    """What a pass took out is not found again (`"password": "[REDACTED]"` is no new secret):
    the count is of credentials, not of passes."""
    text = "\n".join([*(line for line, _ in DETECTOR_SAMPLES.values()), *DIAGNOSTICS])
    once = scrub(text)
    twice = scrub(once.text)
    assert twice.text == once.text
    assert twice.count == 0


def test_a_private_key_quoted_in_json_goes_with_its_body() -> None:
    """In JSON a key is one line (`\\n` escaped): its body goes up to the END marker, the rest of
    the line stays."""
    text = json.dumps(
        {
            "key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEbody\n-----END RSA PRIVATE KEY-----",
            "serial": "1652823051234",
        }
    )
    clean, count = scrub_text(text)
    assert "MIIEbody" not in clean
    assert '"serial": "1652823051234"' in clean
    assert count == 1


def test_digests_and_versions_named_so_stay() -> None:
    """A git commit and a 4-part version are detect-secrets guesses (hex entropy, a public IP);
    named as a digest or a version on their line, they stay; the same values alone go."""
    kept = ['"sha": "8e449bb5f0c2d7a1e3b4c6d8f0a2b4c6d8e0f1a3"', '"version": "34.117.59.81"']
    assert scrub_text("\n".join(kept)) == ("\n".join(kept), 0)
    gone = ['"note": "8e449bb5f0c2d7a1e3b4c6d8f0a2b4c6d8e0f1a3"', "peer 34.117.59.81"]
    assert scrub_text("\n".join(gone))[1] == 2


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from([line for line, _ in DETECTOR_SAMPLES.values()] + DIAGNOSTICS),
        ),
        max_size=12,
    )
)
def test_any_text_keeps_its_lines_and_never_raises(lines: list[str]) -> None:
    """Whatever a tool prints: one line out for each line in (a vendor reads the log by its
    lines), line ends kept, nothing raised."""
    text = "\n".join(lines)
    done = scrub(text)
    assert len(done.text.splitlines()) == len(text.splitlines())
    assert done.stopped_at is None
