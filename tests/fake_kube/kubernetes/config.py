"""kubernetes.config: not in a cluster; a kubeconfig unless $FAKE_KUBE_NO_CONFIG is set."""

from __future__ import annotations

import os


class ConfigException(Exception):
    pass


def load_incluster_config() -> None:
    raise ConfigException("Service host/port is not set.")


def load_kube_config() -> None:
    if os.environ.get("FAKE_KUBE_NO_CONFIG"):
        raise ConfigException("Invalid kube-config file. No configuration found.")
