"""Credentials to plant in what the evidence archive collects (issue #49 §7), and the diagnostic
text around them that must come through untouched.

Every value is made up here to match the pattern of the plugin or form it is for (each plugin's
`denylist` in detect_secrets/plugins/*.py, detect-secrets 1.5.0); none is a real credential.
"""

from __future__ import annotations

import base64

_PEM_BODY = "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB"
_AZURE = base64.b64encode(bytes(range(7, 73))).decode()  # 88 characters of base64

# detect-secrets' secret_type -> (a line holding one, the secret in it)
DETECTOR_SAMPLES: dict[str, tuple[str, str]] = {
    "Artifactory Credentials": ("artifactory AKCp8k2Lm9Qw3Er5Ty7Ui", "AKCp8k2Lm9Qw3Er5Ty7Ui"),
    "AWS Access Key": ("aws key AKIAZ3Q7XW4RT2LMNPQS in use", "AKIAZ3Q7XW4RT2LMNPQS"),
    "Azure Storage Account access key": (
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={_AZURE}",
        _AZURE[:40],
    ),
    "Basic Auth Credentials": (
        "git remote https://alice:Pa55wordNine9@git.example.com/acme.git",
        "Pa55wordNine9",
    ),
    "Cloudant Credentials": (
        "https://acme:" + "9f86d081884c7d659a2feaa0c55ad015" * 2 + "@acme.cloudant.com",
        "9f86d081884c7d659a2feaa0c55ad015" * 2,
    ),
    "Discord Bot Token": (
        "DISCORD MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    ),
    "GitHub Token": (
        "gh auth ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8",
        "ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8",
    ),
    "GitLab Token": ("CI glpat-Zx8Yw7Vu6Ts5Rq4Po3Nm2", "glpat-Zx8Yw7Vu6Ts5Rq4Po3Nm2"),
    "Base64 High Entropy String": (
        'cache_salt = "q8Zt3LmX9vB2nR7kPw5YcJ1hD4sF6gA0"',
        "q8Zt3LmX9vB2nR7kPw5YcJ1hD4sF6gA0",
    ),
    "Hex High Entropy String": (
        'signing = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"',
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    ),
    "IBM Cloud IAM Key": (
        "ibm_cloud_iam_api_key: Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8y7x6w5v",
        "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8y7x6w5v",
    ),
    "IBM COS HMAC Credentials": (
        "cos_hmac_secret_access_key = 0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c",
        "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c",
    ),
    "Public IP (ipv4)": ("login from 34.117.59.81 accepted", "34.117.59.81"),
    "JSON Web Token": (
        "session eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAiZ3B1MDctb3BlcmF0b3IiLCAi"
        "aWF0IjogMTc2NDMwMDAwMH0.Q2hhbmdlTWVJbnRoZVRlc3RTaWduYXR1cmVfdjE",
        "Q2hhbmdlTWVJbnRoZVRlc3RTaWduYXR1cmVfdjE",  # the signature: the plugin's match stops short
    ),
    "Secret Keyword": ('db_password = "Zx9-Lm2!Qr"', "Zx9-Lm2!Qr"),
    "Mailchimp Access Key": (
        "mc 0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a-us12",
        "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a-us12",
    ),
    "NPM tokens": (
        "//registry.npmjs.org/:_authToken=npm_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
        "npm_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
    ),
    "OpenAI Token": (
        "openai sk-proj-Zx8Yw7Vu6Ts5Rq4Po3NmT3BlbkFJAb12Cd34Ef56Gh78Ij90",
        "sk-proj-Zx8Yw7Vu6Ts5Rq4Po3NmT3BlbkFJAb12Cd34Ef56Gh78Ij90",
    ),
    "Private Key": (
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n{_PEM_BODY[::-1]}\n"
        "-----END RSA PRIVATE KEY-----",
        _PEM_BODY,
    ),
    "PyPI Token": (
        "password = pypi-AgEIcHlwaS5vcmc" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9" * 3,
        "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9" * 3,
    ),
    "SendGrid API Key": (
        "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",
        "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",
    ),
    "Slack Token": (
        "bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    "SoftLayer Credentials": (
        "softlayer_api_key: " + "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a" * 2,
        "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a" * 2,
    ),
    "Square OAuth Secret": (
        "sq0csp-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8y7x6w5v",
        "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8y7x6w5v",
    ),
    "Stripe Access Key": ("stripe sk_live_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1J", "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1J"),
    "Telegram Bot Token": (
        "bot 123456789:AAZx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCb",
        "AAZx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCb",
    ),
    "Twilio API Key": (
        "twilio AC0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a",
        "AC0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a",
    ),
}

# Issue #49 §7's 12 forms (the 8 that came through the old scrubber first): (form, line, secret)
TWELVE_FORMS: list[tuple[str, str, str]] = [
    (
        "netrc password",
        "machine hub.example.com login alice password N3trcPa55word",
        "N3trcPa55word",
    ),
    (
        "docker config auth",
        '        "auth": "YWxpY2U6RG9ja2VyUGE1NXdvcmQ="',
        "YWxpY2U6RG9ja2VyUGE1NXdvcmQ=",
    ),
    (
        "kubeconfig client-key-data",
        "    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB",
    ),
    (
        "Slack webhook",
        "ALERTS=https://hooks.slack.com/services/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",
        "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1",
    ),
    (
        "bare hf_ token",
        "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",
        "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",
    ),
    (
        "--password on a command line",
        "root  4242  0.3 python train.py --password Hunter2Secret --epochs 3",
        "Hunter2Secret",
    ),
    (
        "bare JWT",
        "eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAiZ3B1MDctb3BlcmF0b3IiLCAiaWF0IjogMTc2"
        "NDMwMDAwMH0.Q2hhbmdlTWVJbnRoZVRlc3RTaWduYXR1cmVfdjE",
        "Q2hhbmdlTWVJbnRoZVRlc3RTaWduYXR1cmVfdjE",
    ),
    (
        "API key on a kernel-log line",
        "[  101.500000] nvidia-peermem: X-API-Key: 3q2x7WkLm9Qv5Rt8Yp1Zn4Hs6Jd0Fg2C",
        "3q2x7WkLm9Qv5Rt8Yp1Zn4Hs6Jd0Fg2C",
    ),
    ("AWS access key id", "AWS_ACCESS_KEY_ID=AKIAZ3Q7XW4RT2LMNPQS", "AKIAZ3Q7XW4RT2LMNPQS"),
    (
        "GitHub token",
        "token ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8",
        "ghp_Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEdCbA9z8",
    ),
    (
        "PEM private key",
        f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}\n-----END PRIVATE KEY-----",
        _PEM_BODY,
    ),
    (
        "password in a URL",
        "pip index https://ci:Url5ecretPw@pypi.example.com/simple",
        "Url5ecretPw",
    ),
]

# Other spellings of the same forms, seen in the files a bug report copies
MORE_FORMS: list[tuple[str, str, str]] = [
    ("netrc on its own lines", "    password N3trcPa55word", "N3trcPa55word"),
    ("--password=", "mysqldump --password=Hunter2Secret db", "Hunter2Secret"),
    ("*_TOKEN=", "export HF_TOKEN=hf_short1", "hf_short1"),
    (
        "kubeconfig token",
        "    token: Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEd",
        "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0GfEd",
    ),
    ("Bearer", "curl -H 'Authorization: Bearer Zx8Yw7Vu6Ts5Rq4Po'", "Zx8Yw7Vu6Ts5Rq4Po"),
    ("API key with a space", "api key: 3q2x7WkLm9Qv5Rt8Yp1Z", "3q2x7WkLm9Qv5Rt8Yp1Z"),
    (
        "URL query",
        "GET https://blob.example.com/x?sv=2024&sig=Zx8Yw7Vu6Ts5Rq4Po3",
        "Zx8Yw7Vu6Ts5Rq4Po3",
    ),
    ("JSON password", '  "password": "Js0nPa55word",', "Js0nPa55word"),
    (
        "API key on a kernel-log line, no separator",
        "[  101.600000] mlx5_core: using api key 3q2x7WkLm9Qv5Rt8Yp1Z",
        "3q2x7WkLm9Qv5Rt8Yp1Z",
    ),
    ("a token after its name", "[  7.1] agent: token is Zx8Yw7Vu6Ts5", "Zx8Yw7Vu6Ts5"),
    ("a Ruby or PHP hash", 'db_password => "Rb9Lm2Qr77"', "Rb9Lm2Qr77"),
    (
        "allow-listed by pragma",
        'key = "AKIAZ3Q7XW4RT2LMNPQT"  # pragma: allowlist secret',
        "AKIAZ3Q7XW4RT2LMNPQT",
    ),
]

# What the vendor needs: each line must come through exactly as it was
DIAGNOSTICS: list[str] = [
    "[  100.000000] NVRM: Xid (PCI:0008:01:00): 79, pid=1, GPU has fallen off the bus.",
    "[  101.000000] NVRM: Xid (PCI:0000:cb:00): 48, pid=2212, name=python3, DBE (0x00000002)",
    "    GPU UUID                              : GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708",
    "    MIG UUID : MIG-9a8b7c6d-5e4f-3a2b-1c0d-9e8f7a6b5c4d",
    "    Serial Number                         : 1652823051234",
    "    Bus Id                                : 00000008:01:00.0",
    "    VBIOS Version                         : 96.00.89.00.01",
    "    Board Part Number                     : 692-2G520-0200-000",
    "    Inforom Image Version : G520.0200.00.05",
    "[    1.200000] pci 0000:cb:00.0: [10de:2335] type 00 class 0x030200",
    "[    0.000000] BIOS-e820: [mem 0x0000000000100000-0x000000007fffffff] usable",
    "ecc error at 0x7f3a9b2c4d10",
    '  "uuid": "GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708",',
    '  "serial": "1652823051234",',
    '  "pci_bus_id": "00000008:01:00.0",',
    '  "machine_id": "4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f",',
    "tokens_per_second 25000",
    "[    5.000000] tpm tpm0: token ring ready, secret area of 4096 bytes",
    '  "tokens_per_second": 25000.0,',
    "NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0",
    "eth0 inet 10.12.0.7/16 brd 10.12.255.255",
    "https://docs.nvidia.com/deploy/xid-errors/index.html",
    "nvidia-bug-report.sh Version: 1",
    '      "sha": "8e449bb5f0c2d7a1e3b4c6d8f0a2b4c6d8e0f1a3",',
    '    "lock_sha256": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",',
    '        "version": "0.11.0.1",',
    "cuDNN Version: 9.10.2.21",
    '  "alphabet": "0123456789abcdef",',
]
