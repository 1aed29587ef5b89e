"""Shared by the audit tests: one real run to audit (built once per session, copied per
test) and ed25519 keys made by the real ssh-keygen."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.api import Store

from .audit_helpers import make_key
from .audit_run import Chain, build_run, copy_store


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of tests/audit/audit_run.py's 32-step run (do not write to it)."""
    return build_run(tmp_path_factory.mktemp("audit-run"))


@pytest.fixture
def fresh(base: Path, tmp_path: Path) -> tuple[Store, Chain]:
    """A private copy of that store, with its chain."""
    store = copy_store(base, tmp_path / "store")
    return store, Chain.of(store)


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("keys")
    return {"alice": make_key(folder, "alice"), "bob": make_key(folder, "bob"),
            "rsa": make_key(folder, "rsa", kind="rsa"),
            "locked": make_key(folder, "locked", passphrase="secret phrase")}
