"""Checkpoints (resume after eviction) and the saved model, both written atomically.

A checkpoint records the run's identity (recipe, epochs, seed, data digest, world size); resuming
with a different identity is refused, since the result would match neither run.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from gpuaccept.errors import InputError
from gpuaccept.output_files import write_bytes_atomically

# /2: the step count replaced the LambdaLR state (the step is captured in a CUDA graph now)
CHECKPOINT_FORMAT = "gpuaccept-mnist-checkpoint/2"
MODEL_FORMAT = "gpuaccept-mnist-model/1"


def _save(path: Path, payload: dict[str, Any], flag: str) -> None:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    try:
        write_bytes_atomically(path, buffer.getvalue())
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write: {error.strerror or error}") from None


def _load(path: Path, expected_format: str, what: str) -> dict[str, Any]:
    from gpuaccept.input_files import refuse_special_file

    refuse_special_file(path, what)  # a FIFO would block torch.load for ever
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"{what} {path}: file not found") from None
    except Exception as error:  # torch raises a zoo of types for a damaged file
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{what} {path}: unreadable ({reason[:160]})") from None
    if not isinstance(payload, dict) or payload.get("format") != expected_format:
        raise InputError(f"{what} {path}: not a {expected_format} file")
    return payload


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    _save(path, {"format": CHECKPOINT_FORMAT, **payload}, "--checkpoint")


def load_checkpoint(path: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint at `path`, refused unless it was written by a run with this identity."""
    payload = _load(path, CHECKPOINT_FORMAT, "--checkpoint")
    stored = payload.get("identity")
    if not isinstance(stored, dict):
        raise InputError(f"--checkpoint {path}: has no run identity")
    for key, value in identity.items():
        if stored.get(key) != value:
            raise InputError(
                f"--checkpoint {path}: written by a run with {key}={stored.get(key)!r}, this run "
                f"has {key}={value!r}; match the flags or remove the checkpoint to start over"
            )
    return payload


def model_fingerprint(model: torch.nn.Module) -> str:
    """The architecture as a digest of its parameter and buffer names, shapes and dtypes: a
    checkpoint of another model (or another gpuaccept's model of the same name) never loads."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
    return digest.hexdigest()[:16]


def restore_checkpoint(path: Path, payload: dict[str, Any], restore: Any) -> None:
    """Call `restore(payload)`; a checkpoint whose identity matched but whose content does not
    (missing keys, other shapes) is an input error naming the file, never a traceback."""
    try:
        restore(payload)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(
            f"--checkpoint {path}: its content does not match what it says it is "
            f"({type(error).__name__}: {reason[:160]}); remove it to start over"
        ) from None


def save_model(path: Path, state_dict: dict[str, torch.Tensor], metadata: dict[str, Any]) -> None:
    """The trained weights with what produced them (epoch, accuracy, seed, environment hash)."""
    _save(path, {"format": MODEL_FORMAT, "state_dict": state_dict, **metadata}, "--save-model")


def load_model_file(path: Path) -> dict[str, Any]:
    return _load(path, MODEL_FORMAT, "model file")
