"""The on-disk format of a sharded ZeRO checkpoint: atomic files, checksums, and the checks made on reading.

A checkpoint is one directory ``step-000006/`` (the number of steps taken) holding one file per rank,
``rank-00003.npz``, and ``metadata.json``. Rank r's file holds, for every unit u and each of ``weights16`` (the
16-bit bits as uint16), ``master``, ``m`` and ``v`` (fp32), the elements rank r owns under ZeRO's shard map
``ChunkLayout(S_u, N)``: chunk r of the unit, without padding. The metadata names the stage, N, the unit sizes,
the layout, the 16-bit type, the run's seed and settings, Adam's step count, the loss scaler's state, and the
SHA-256 and size of every rank file. Each rank file also holds ``header``: its own rank, N, the stage, the step
and the SHA-256 of the run's metadata (everything but the checksum table), as UTF-8 JSON in a uint8 array, so a
file moved to another rank, step or run is refused even when the checksum table is rewritten to match.

Writes are atomic: every file is written to a temporary name, flushed and fsync'ed, then renamed; the step
directory is assembled under a temporary name and renamed into place once every rank's file and the metadata
are in it, and the root's ``latest`` pointer is replaced the same way. A reader never sees a half-written
checkpoint; one that was cut short (a temporary directory) is not a checkpoint. Reading checks everything
before returning anything (:func:`read_rank_file`, :func:`read_metadata`): a truncated, corrupted, mismatched
or incomplete checkpoint is refused with a :class:`CheckpointError` naming the file and the field.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["CheckpointError", "FORMAT", "VERSION", "STATES", "METADATA", "LATEST", "rank_file_name",
           "step_dir_name", "HEADER", "atomic_write", "fsync_dir", "sha256", "verify_file", "read_metadata",
           "read_rank_file", "header_array", "state_key", "npz_bytes"]

FORMAT, VERSION = "ringemu-zero-checkpoint", 2  # 2: a header in every rank file
STATES = ("weights16", "master", "m", "v")  # per unit, per rank: the owned chunk of each
METADATA, LATEST, HEADER = "metadata.json", "latest", "header"  # HEADER: the rank file's own JSON


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file and the field."""


def rank_file_name(rank: int) -> str:
    return f"rank-{rank:05d}.npz"


def step_dir_name(steps_done: int) -> str:
    return f"step-{steps_done:06d}"


def state_key(unit: int, state: str) -> str:
    return f"unit{unit}.{state}"


def fsync_dir(path: Path) -> None:
    """fsync a directory, so that a rename in it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, fsync, rename, fsync dir.
    A write that fails (a full disk: ENOSPC, a quota: EDQUOT, any other OSError) removes its temporary file and
    raises a CheckpointError naming ``path``, the size and the reason; ``path`` is left as it was."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        full = " (disk full)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise CheckpointError(f"{path}: could not write {len(data):,} B{full}: {exc.strerror or exc}; its "
                              f"temporary file was removed") from None
    fsync_dir(path.parent)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify_file(path: Path, expected: dict) -> bytes:
    """The bytes of ``path`` if its size and SHA-256 are those ``expected`` ({"bytes", "sha256"}); else a
    CheckpointError naming the file and the field."""
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the metadata lists it)")
    data = path.read_bytes()
    if len(data) != expected["bytes"]:
        raise CheckpointError(f"{path}: field bytes: size {len(data)} B, the metadata says {expected['bytes']} B "
                              f"(truncated or extended)")
    digest = sha256(data)
    if digest != expected["sha256"]:
        raise CheckpointError(f"{path}: field sha256: checksum {digest[:16]}… differs from the metadata's "
                              f"{expected['sha256'][:16]}… (corrupted)")
    return data


_FIELDS = {"format": str, "version": int, "stage": str, "n_ranks": int, "unit_sizes": list, "layout": str,
           "wire_dtype": str, "seed": int, "grads": str, "micro_batch": int, "width": (int, type(None)),
           "steps_done": int, "adam_step": int, "adam": dict, "loss_scaling": dict, "loss_scale": (int, float),
           "clean_steps": int, "files": dict}


def read_metadata(directory: Path) -> dict:
    """The checked ``metadata.json`` of a step directory; a CheckpointError names the file and the field."""
    path = directory / METADATA
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (not a checkpoint, or one that was not completed)")
    try:
        meta = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    for name, kind in _FIELDS.items():
        if name not in meta:
            raise CheckpointError(f"{path}: field {name} missing")
        if isinstance(meta[name], bool) or not isinstance(meta[name], kind):
            raise CheckpointError(f"{path}: field {name} has the wrong type ({type(meta[name]).__name__})")
    if (meta["format"], meta["version"]) != (FORMAT, VERSION):
        raise CheckpointError(f"{path}: field format/version is {meta['format']!r} {meta['version']}, expected "
                              f"{FORMAT!r} {VERSION}")
    n = meta["n_ranks"]
    if n < 1 or not meta["unit_sizes"] or any(isinstance(s, bool) or not isinstance(s, int) or s < 1
                                               for s in meta["unit_sizes"]):
        raise CheckpointError(f"{path}: field n_ranks or unit_sizes out of range")
    expected_files = {rank_file_name(r) for r in range(n)}
    if set(meta["files"]) != expected_files:
        missing = sorted(expected_files - set(meta["files"]))[:3]
        raise CheckpointError(f"{path}: field files does not list exactly the {n} rank files (e.g. missing "
                              f"{missing})")
    for name, entry in meta["files"].items():
        if not (isinstance(entry, dict) and isinstance(entry.get("bytes"), int)
                and isinstance(entry.get("sha256"), str)):
            raise CheckpointError(f"{path}: field files.{name} must hold bytes and sha256")
    return meta


def header_array(header: dict) -> np.ndarray:
    """A rank file's header as the uint8 array stored under HEADER."""
    return np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)


def read_rank_file(path: Path, data: bytes, expected_lengths: dict[str, int], wire: np.dtype) -> tuple[dict, dict]:
    """(header, arrays) of one verified rank file, the arrays checked against ``expected_lengths`` (key ->
    elements); nothing else may be in the file."""
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        arrays = {key: archive[key] for key in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise CheckpointError(f"{path}: not a readable .npz ({exc})") from None
    raw = arrays.pop(HEADER, None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise CheckpointError(f"{path}: field {HEADER} missing or not a uint8 array")
    try:
        header = json.loads(raw.tobytes().decode())
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: field {HEADER} is not UTF-8 JSON") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: field {HEADER} is not a JSON object")
    for key, length in expected_lengths.items():
        if key not in arrays:
            raise CheckpointError(f"{path}: field {key} missing")
        want = np.uint16 if key.endswith("weights16") else np.float32
        a = arrays[key]
        if a.dtype != want or a.ndim != 1 or a.size != length:
            raise CheckpointError(f"{path}: field {key} is {a.dtype}[{a.size}], expected "
                                  f"{np.dtype(want)}[{length}]")
    extra = sorted(set(arrays) - set(expected_lengths))
    if extra:
        raise CheckpointError(f"{path}: unexpected field {extra[0]}")
    return header, {k: (a.view(wire) if k.endswith("weights16") else a) for k, a in arrays.items()}


def npz_bytes(arrays: dict) -> bytes:
    """``arrays`` as the bytes of an uncompressed .npz."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()
