"""The ledger as a transparency log: RFC 6962 hashing checked against the vectors other
implementations publish and against a plain reference implementation, signed notes against
Go's sumdb/note, and the store's log appended, proved, exported and defended against a
fork."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.audit import log as L
from lineage.audit import merkle as M
from lineage.audit.bundle import read_bundle_log
from lineage.audit.ledger import add_records
from lineage.audit.note import Checkpoint, NoteError, Signer, Verifier, open_note
from lineage.audit.records import record_id
from lineage.errors import InputError
from lineage.runs.chain import canonical_json

from ..conftest import REPO, Cli
from .audit_run import RUN, Chain, copy_store, ledger

# -- published vectors (transparency-dev/merkle proof/verify_test.go, the RFC 6962 tree of
# certificate-transparency's tests; golang.org/x/mod sumdb/note note_test.go) -------------

CT_LEAVES = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243",
                                        "5051525354555657", "606162636465666768696a6b6c6d6e6f")]
CT_ROOTS = ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"]
CT_INCLUSION = [  # (leaf index, tree size, proof)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"])]
CT_CONSISTENCY = [  # (old size, size, proof)
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"])]
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = GO_TEXT + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgY" \
    "N1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"


# -- a plain reference implementation, straight from RFC 6962 §2.1 ----------------------


def ref_mth(leaves: list[bytes]) -> bytes:
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + ref_mth(leaves[:k]) + ref_mth(leaves[k:])).digest()


def ref_path(m: int, leaves: list[bytes]) -> list[bytes]:
    if len(leaves) <= 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if m < k:
        return ref_path(m, leaves[:k]) + [ref_mth(leaves[k:])]
    return ref_path(m - k, leaves[k:]) + [ref_mth(leaves[:k])]


def ref_subproof(m: int, leaves: list[bytes], whole: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if whole else [ref_mth(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return ref_subproof(m, leaves[:k], whole) + [ref_mth(leaves[k:])]
    return ref_subproof(m - k, leaves[k:], False) + [ref_mth(leaves[:k])]


def tiled(entries: list[bytes], chunks: list[int] | None = None) -> tuple[M.TiledTree, dict]:
    """A tree of `entries` appended in `chunks` (sizes), through the tiles alone."""
    tiles: dict[tuple[int, int], bytes] = {}

    def read(level: int, index: int, width: int) -> bytes:
        return tiles[(level, index)][:width * M.HASH_BYTES]

    done = 0
    for size in [*(chunks or []), len(entries)]:
        size = min(len(entries), done + size) if chunks else len(entries)
        appender = M.TileAppender.over(M.TiledTree(done, read))
        appender.append(M.leaf_hash(e) for e in entries[done:size])
        for (level, index, _), data in appender.written.items():
            tiles[(level, index)] = data
        done = size
    return M.TiledTree(len(entries), read), tiles


def test_roots_proofs_and_consistency_match_the_published_vectors() -> None:
    tree, _ = tiled(CT_LEAVES)
    assert M.EMPTY_ROOT.hex() == hashlib.sha256(b"").hexdigest() == tree.root(0).hex()
    assert [tree.root(n).hex() for n in range(1, 9)] == CT_ROOTS
    for index, size, proof in CT_INCLUSION:
        assert [p.hex() for p in tree.inclusion_proof(index, size)] == proof
        assert M.verify_inclusion(index, size, M.leaf_hash(CT_LEAVES[index]),
                                  [bytes.fromhex(p) for p in proof],
                                  bytes.fromhex(CT_ROOTS[size - 1]))
    for old, size, proof in CT_CONSISTENCY:
        assert [p.hex() for p in tree.consistency_proof(old, size)] == proof
        assert M.verify_consistency(old, size, bytes.fromhex(CT_ROOTS[old - 1]),
                                    bytes.fromhex(CT_ROOTS[size - 1]),
                                    [bytes.fromhex(p) for p in proof])


@pytest.mark.parametrize("old,size,proof", CT_CONSISTENCY)
def test_a_corrupted_consistency_proof_fails(old: int, size: int, proof: list[str]) -> None:
    roots = [bytes.fromhex(r) for r in CT_ROOTS]
    good = [bytes.fromhex(p) for p in proof]
    bad = [(old - 1, size, roots[old - 1], roots[size - 1], good),
           (old, size, roots[size - 1], roots[old - 1], good),  # swapped roots
           (old, size, roots[old - 1], roots[size - 1], good[:-1]),
           (old, size, roots[old - 1], roots[size - 1], [*good, roots[0]]),
           (old, size, roots[old - 1], roots[size - 1], []),
           *[(old, size, roots[old - 1], roots[size - 1],
              [*good[:i], bytes([good[i][0] ^ 16]) + good[i][1:], *good[i + 1:]])
             for i in range(len(good))]]
    for case in bad:
        assert not M.verify_consistency(*case)


@pytest.mark.parametrize("index,size,proof", CT_INCLUSION)
def test_a_corrupted_inclusion_proof_fails(index: int, size: int, proof: list[str]) -> None:
    root, good = bytes.fromhex(CT_ROOTS[size - 1]), [bytes.fromhex(p) for p in proof]
    leaf = M.leaf_hash(CT_LEAVES[index])
    assert M.verify_inclusion(index, size, leaf, good, root)
    bad = [(index ^ 1, size, leaf, good, root), (index, size * 2, leaf, good, root),
           (index, size, M.leaf_hash(b"WrongLeaf"), good, root),
           (index, size, leaf, good, M.EMPTY_ROOT), (index, size, leaf, [*good, root], root),
           (index, size, leaf, [root, *good], root), (index, size, leaf, good[:-1], root),
           *[(index, size, leaf, [*good[:i], bytes([good[i][0] ^ 8]) + good[i][1:],
                                  *good[i + 1:]], root) for i in range(len(good))]]
    for case in bad:
        assert not M.verify_inclusion(*case)


@settings(max_examples=25, deadline=None)
@given(size=st.integers(1, 1400), chunks=st.lists(st.integers(1, 600), max_size=6),
       data=st.data())
def test_the_tiled_tree_agrees_with_the_reference_however_it_was_appended(
        size: int, chunks: list[int], data: st.DataObject) -> None:
    entries = [f"entry {i}".encode() for i in range(size)]
    tree, _ = tiled(entries, chunks)
    assert tree.root() == ref_mth(entries)
    old = data.draw(st.integers(1, size))
    index = data.draw(st.integers(0, old - 1))
    assert tree.root(old) == ref_mth(entries[:old])
    assert tree.inclusion_proof(index, old) == ref_path(index, entries[:old])
    assert tree.consistency_proof(old) == ref_subproof(old, entries, True)
    assert M.verify_inclusion(index, size, M.leaf_hash(entries[index]),
                              tree.inclusion_proof(index), ref_mth(entries))
    assert M.verify_consistency(old, size, ref_mth(entries[:old]), ref_mth(entries),
                                tree.consistency_proof(old))


def test_tiles_are_what_tlog_tiles_says() -> None:
    entries = [b"%d" % i for i in range(256 * 256 + 300)]
    tree, tiles = tiled(entries, [1000, 70000])
    hashes = [M.leaf_hash(e) for e in entries]
    assert tiles[(0, 0)] == b"".join(hashes[:256])  # level 0: the leaf hashes
    assert tiles[(0, 257)] == b"".join(hashes[256 * 257:])  # the partial edge: 44 of them
    assert tiles[(1, 0)][32:64] == ref_mth(entries[256:512])  # level 1: height-8 nodes
    assert tiles[(2, 0)] == ref_mth(entries[:65536])  # level 2: one height-16 node
    assert M.tile_path(0, 0) == "tile/0/000"
    assert M.tile_path(1, 1234067) == "tile/1/x001/x234/067"
    assert M.tile_path(0, 257, 44) == "tile/0/257.p/44"
    assert M.entries_path(1000) == "tile/entries/x001/000"


# -- signed notes --------------------------------------------------------------------


def test_signing_reproduces_gos_note_byte_for_byte() -> None:
    signer = Signer.parse(GO_SIGNER)
    assert str(signer) == GO_SIGNER and str(signer.verifier) == GO_VERIFIER
    assert signer.sign(GO_TEXT) == GO_NOTE
    assert open_note(GO_NOTE, Verifier.parse(GO_VERIFIER)) == GO_TEXT


def test_an_altered_or_foreign_note_does_not_open() -> None:
    verifier = Verifier.parse(GO_VERIFIER)
    for note in (GO_NOTE.replace("cryptography", "cryptographY"),
                 GO_NOTE.replace("x08go", "x08gp"), GO_TEXT, GO_NOTE.rstrip("\n"),
                 Signer.generate("PeterNeumann").sign(GO_TEXT)):
        with pytest.raises(NoteError):
            open_note(note, verifier)
    cosigned = GO_NOTE + Signer.generate("witness").sign(GO_TEXT).split("\n\n")[1]
    assert open_note(cosigned, verifier) == GO_TEXT  # other keys' lines are ignored


@pytest.mark.parametrize("key", [GO_VERIFIER[:-1], GO_VERIFIER.replace("c74f", "c75f"),
                                 "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4"
                                 "izWy10TW", GO_VERIFIER.replace("+AR", "+Ah")])
def test_a_mangled_verifier_key_is_refused(key: str) -> None:
    with pytest.raises(NoteError):
        Verifier.parse(key)


def test_checkpoints_parse_only_in_their_form() -> None:
    root = base64.b64encode(bytes(32)).decode()
    assert Checkpoint.parse(f"example.org/log\n12\n{root}\n") == Checkpoint(
        "example.org/log", 12, bytes(32))
    for text in (f"example.org/log\n012\n{root}\n", f"example.org/log\n-1\n{root}\n",
                 "example.org/log\n1\nAAAA\n", f"\n1\n{root}\n"):
        with pytest.raises(NoteError):
            Checkpoint.parse(text)


# -- the store's log -----------------------------------------------------------------


def _head(store: Store) -> L.LogHead:
    with store.reader(views=False) as con:
        head = L.own_head(con)
    assert head is not None
    return head


def _entries(store: Store) -> list[bytes]:
    return [row[0].encode() for row in store.sql(
        "SELECT entry FROM audit_log_entries ORDER BY position").rows]


def test_every_record_added_is_a_leaf_and_the_head_is_signed(
        fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records[:5], source="a")
    first = _head(store)
    add_records(store, records, source="b")
    head = _head(store)
    entries = _entries(store)
    assert (first.size, head.size) == (5, len(records))
    assert entries[:5] == sorted((canonical_json(r).encode() for r in records[:5]),
                                 key=lambda e: (json.loads(e)["created_at"], record_id(
                                     json.loads(e))))
    assert sorted(entries) == sorted(canonical_json(r).encode() for r in records)
    assert head.root == ref_mth(entries)
    text = open_note(head.checkpoint, Verifier.parse(head.verifier_key))
    assert Checkpoint.parse(text) == Checkpoint(head.origin, head.size, ref_mth(entries))
    key = store.root / L.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600
    assert str(Signer.parse(key.read_text()).verifier) == head.verifier_key
    with store.reader(views=False) as con:  # the first checkpoint still holds in the second
        tree = L.stored_tree(con, head.origin, head.size)
        assert M.verify_consistency(5, head.size, first.root, head.root,
                                    tree.consistency_proof(5))
        proofs = L.inclusion_proofs(con, [record_id(r) for r in records])
    for record in records:
        proof = proofs[record_id(record)]
        assert M.verify_inclusion(proof.index, proof.size,
                                  M.leaf_hash(canonical_json(record).encode()),
                                  proof.proof, head.root)
    add_records(store, records, source="again")  # nothing new: the log stays as it is
    assert _head(store) == head


def test_a_newly_signed_version_is_a_leaf_of_its_own(fresh: tuple[Store, Chain],
                                                     keys: dict[str, Path]) -> None:
    from lineage.audit.sshsig import sign_record

    store, chain = fresh
    record = chain.initial(who="alice")
    add_records(store, [record], source="a")
    signed = sign_record(record, keys["alice"])
    added = add_records(store, [signed], source="b")
    assert added.newly_signed == [record_id(signed)] and added.added == []
    assert _entries(store) == [canonical_json(record).encode(),
                               canonical_json(signed).encode()]


def test_a_store_without_its_key_refuses_to_extend_its_log(fresh: tuple[Store, Chain]) -> None:
    from lineage.errors import StoreError

    store, chain = fresh
    records = ledger(chain)
    add_records(store, records[:2], source="a")
    (store.root / L.KEY_FILE).unlink()
    with pytest.raises(StoreError, match="ledger.key is missing"):
        add_records(store, records[2:4], source="b")
    assert store.sql("SELECT count(*) FROM audit_records").rows == [(2,)]


def _export(store: Store, path: Path) -> Path:
    Cli(store.root).json("audit", "export", RUN, "-o", str(path))
    return path


def test_a_bundle_carries_the_log_and_a_follower_keeps_its_copy(
        fresh: tuple[Store, Chain], base: Path, tmp_path: Path) -> None:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records[:6], source="a")
    follower = copy_store(base, tmp_path / "follower")
    Cli(follower.root).json("audit", "import", str(_export(store, tmp_path / "one.zip")))
    with zipfile.ZipFile(tmp_path / "one.zip") as archive:
        manifest = json.loads(archive.read("MANIFEST.json"))
        assert manifest["spec"] == "lineage-audit-bundle/2"
        assert archive.read("log/checkpoint").decode() == _head(store).checkpoint
        assert archive.read("log/tile/0/000.p/6") == b"".join(
            M.leaf_hash(e) for e in _entries(store))
    held = {row[0]: row[1:] for row in follower.sql(
        "SELECT origin, own, size FROM audit_logs").rows}
    assert held[_head(store).origin] == (False, 6)
    assert _head(follower).size == 6  # its own log took the six records in
    add_records(store, records[6:], source="b")  # the log grows: the copy follows
    Cli(follower.root).json("audit", "import", str(_export(store, tmp_path / "two.zip")))
    assert follower.sql(f"SELECT size FROM audit_logs WHERE origin = "
                        f"'{_head(store).origin}'").rows == [(len(records),)]
    # an older copy is a prefix of the one held: accepted, the held copy unchanged
    Cli(follower.root).json("audit", "import", str(tmp_path / "one.zip"))


def test_a_forked_ledger_is_refused_naming_the_first_differing_leaf(
        fresh: tuple[Store, Chain], base: Path, tmp_path: Path) -> None:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records[:4], source="a")
    twin = Store(tmp_path / "twin")
    shutil.copytree(store.root, twin.root)  # the operator's second face: same key, same past
    add_records(store, records[4:8], source="b")
    add_records(twin, records[8:10], source="c")
    follower = copy_store(base, tmp_path / "follower")
    Cli(follower.root).json("audit", "import", str(_export(store, tmp_path / "shown.zip")))
    result = Cli(follower.root)("audit", "import", str(_export(twin, tmp_path / "fork.zip")),
                                code=None)
    assert result.exit_code == 1
    first = min(i for i, (a, b) in enumerate(zip(_entries(store), _entries(twin), strict=False))
                if a != b)
    assert first == 4
    assert re.search(rf"fork.zip: the log {re.escape(_head(store).origin)} is not an extension"
                     rf" of the copy held: leaf {first} differs \(held: 8 leaves, this copy: "
                     rf"6\): refused", result.stderr), result.stderr
    assert follower.sql("SELECT count(*) FROM audit_records").rows == [(8,)]  # nothing added


def test_a_bundle_whose_log_was_tampered_with_is_refused(
        fresh: tuple[Store, Chain], tmp_path: Path) -> None:
    store, chain = fresh
    add_records(store, ledger(chain)[:3], source="a")
    path = _export(store, tmp_path / "ledger.zip")
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    cases = {"tile": ("log/tile/0/000.p/3", bytes(96)),
             "checkpoint": ("log/checkpoint", members["log/checkpoint"].replace(b"\n3\n",
                                                                                  b"\n2\n"))}
    for what, (name, data) in cases.items():
        forged = dict(members, **{name: data})
        manifest = json.loads(forged["MANIFEST.json"])
        manifest["members"][name] = __import__("blake3").blake3(data).hexdigest()
        body = {k: v for k, v in manifest.items() if k != "digest"}
        manifest["digest"] = __import__("blake3").blake3(canonical_json(body).encode()
                                                         ).hexdigest()
        forged["MANIFEST.json"] = canonical_json(manifest).encode()
        out = tmp_path / f"{what}.zip"
        with zipfile.ZipFile(out, "w") as archive:
            for member, content in forged.items():
                archive.writestr(member, content)
        with pytest.raises(InputError, match="log"):
            read_bundle_log(out)


def test_audit_show_gives_each_records_inclusion_proof(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records, source="a")
    shown = Cli(store.root).json("audit", "show", RUN, "--step", "0")
    head = _head(store)
    assert shown["log_inclusion"]
    for rid, proof in shown["log_inclusion"].items():
        entry = next(canonical_json(r) for r in records if record_id(r) == rid).encode()
        assert proof["origin"] == head.origin and proof["size"] == head.size
        assert M.verify_inclusion(proof["index"], proof["size"], M.leaf_hash(entry),
                                  [bytes.fromhex(p) for p in proof["proof"]], head.root)
    text = Cli(store.root)("audit", "show", RUN, "--step", "0").stdout
    assert f"proved in {head.origin} at size {head.size}" in text


def test_the_specs_golden_vectors_are_rederived() -> None:
    """docs/audit-spec.md's log vectors, recomputed with the reference implementation."""
    text = (REPO / "docs" / "audit-spec.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- log-vectors:start -->"):text.index("<!-- log-vectors:end -->")]
    vectors = json.loads(block[block.index("{"):block.rindex("}") + 1])
    entries = [e.encode() for e in vectors["entries"]]
    assert vectors["root"] == ref_mth(entries).hex()
    for item in vectors["inclusion"]:
        assert [bytes.fromhex(p) for p in item["proof"]] == ref_path(
            item["index"], entries[:item["size"]])
    for item in vectors["consistency"]:
        assert [bytes.fromhex(p) for p in item["proof"]] == ref_subproof(
            item["old_size"], entries[:item["size"]], True)
    signer = Signer.parse(vectors["signer_key"])
    assert str(signer.verifier) == vectors["verifier_key"]
    checkpoint = Checkpoint(signer.name, len(entries), ref_mth(entries))
    assert signer.sign(checkpoint.text) == vectors["checkpoint"]


def test_store_verify_checks_the_log(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    add_records(store, ledger(chain), source="a")  # fewer than 256: one partial tile
    assert Cli(store.root).json("store", "verify")["ok"]
    with store.writer() as con:  # one leaf's hash in its tile flipped
        data = bytearray(con.execute("SELECT data FROM audit_log_edges WHERE level = 0 AND "
                                     "idx = 0").fetchall()[0][0])
        data[40] ^= 1
        con.execute("UPDATE audit_log_edges SET data = ? WHERE level = 0 AND idx = 0",
                    [bytes(data)])
    report = Cli(store.root).json("store", "verify", code=1)
    assert [(p["table"], p["status"], p["owner"]) for p in report["problems"]] == [
        ("audit_log_tiles", "log-mismatch", f"ledger log {_head(store).origin}")]
    assert "tile/0/000" in report["problems"][0]["message"]
    with store.writer() as con:  # an entry rewritten: the record no longer at its leaf
        con.execute("UPDATE audit_log_edges SET data = ? WHERE level = 0 AND idx = 0",
                    [bytes(data[:40]) + bytes([data[40] ^ 1]) + bytes(data[41:])])
        con.execute("UPDATE audit_log_entries SET entry = entry || ' ' WHERE position = 1")
    tables = {p["table"] for p in Cli(store.root).json("store", "verify", code=1)["problems"]}
    assert tables == {"audit_log_tiles", "audit_records"}


def test_a_ledger_from_before_the_log_joins_it_at_the_next_write(
        fresh: tuple[Store, Chain], tmp_path: Path) -> None:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records[:6], source="a")
    with store.writer() as con:  # as a store migrated to schema 11 holds its ledger
        for table in ("audit_logs", "audit_log_entries", "audit_log_tiles", "audit_log_edges"):
            con.execute(f"DELETE FROM {table}")
        con.execute("UPDATE audit_records SET log_position = NULL")
    shown = Cli(store.root).json("audit", "show", RUN, "--step", "0")
    assert shown["log_inclusion"] == {}  # not yet in a log: no proof claimed
    add_records(store, records[6:8], source="b")
    held = sorted(records[:8], key=lambda r: (r["created_at"], record_id(r)))
    assert _entries(store) == [canonical_json(r).encode() for r in held]
    assert _head(store).size == 8


def test_an_export_starts_the_log_of_a_store_that_has_none(
        fresh: tuple[Store, Chain], tmp_path: Path) -> None:
    store, chain = fresh
    add_records(store, ledger(chain)[:3], source="a")
    with store.writer() as con:
        for table in ("audit_logs", "audit_log_entries", "audit_log_tiles", "audit_log_edges"):
            con.execute(f"DELETE FROM {table}")
        con.execute("UPDATE audit_records SET log_position = NULL")
    records, copy = read_bundle_log(_export(store, tmp_path / "b.zip"))
    assert copy is not None and copy.head.size == 3 == len(records)


def _plain_records(store: Store, count: int) -> list[str]:
    """`count` records held before the log existed, written straight into the ledger's
    table (enough of them for full tiles at two levels in a second)."""
    with store.writer() as con:
        con.execute(
            "INSERT INTO audit_records (id, kind, run, chain_head, step, last_step, auditor, "
            "signed, created_at, record) SELECT 'r' || lpad(i::VARCHAR, 6, '0'), "
            "'attestation', 'r', 'h', 0, 0, 'a', false, TIMESTAMP '2026-01-01' + "
            "to_seconds(i), '{\"n\":' || i || '}' FROM range(?) t(i)", [count])
    return [f"r{i:06d}" for i in range(count)]


def _proofs(store: Store, ids: list[str]) -> dict[str, L.InclusionProof]:
    with store.reader(views=False) as con:
        return L.inclusion_proofs(con, ids)


def test_proofs_read_full_tiles_by_key_and_survive_the_schema_12_migration(
        fresh_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = fresh_store(tmp_path / "store")
    count = 256 * 256 + 300  # full tiles at levels 0 and 1, edges at levels 0, 1 and 2
    ids = _plain_records(store, count)
    with store.writer() as con:
        head = L.append_records(con, store.root, [])
    entries = [f'{{"n":{i}}}'.encode() for i in range(count)]
    assert head.size == count and head.root == ref_mth(entries[:count])
    picked = [0, 255, 256, 40_000, 65_535, 65_536, count - 1]
    proofs = _proofs(store, [ids[i] for i in picked])
    for i in picked:
        proof = proofs[ids[i]]
        assert proof.index == i and proof.leaf_hash == M.leaf_hash(entries[i])
        assert list(proof.proof) == ref_path(i, entries)
    keys = store.sql("SELECT tile_key, origin, level, idx FROM audit_log_tiles").rows
    assert len(keys) == count // 256 + 1 and all(k == L.tile_key(*rest) for k, *rest in keys)

    with store.writer() as con:  # back to schema 11's table: no key, a compound primary key
        con.execute("CREATE TABLE old_tiles (origin VARCHAR NOT NULL, level INTEGER NOT NULL, "
                    "idx BIGINT NOT NULL, width INTEGER NOT NULL, data BLOB NOT NULL, "
                    "PRIMARY KEY (origin, level, idx))")
        con.execute("INSERT INTO old_tiles SELECT origin, level, idx, width, data "
                    "FROM audit_log_tiles")
        con.execute("DROP TABLE audit_log_tiles")
        con.execute("ALTER TABLE old_tiles RENAME TO audit_log_tiles")
        con.execute("UPDATE schema_info SET value = '11' WHERE key = 'schema_version'")
    Cli(store.root)("store", "migrate")
    assert _proofs(store, [ids[i] for i in picked]) == proofs
    assert Cli(store.root).json("store", "verify")["ok"]
