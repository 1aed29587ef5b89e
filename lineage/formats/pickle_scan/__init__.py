"""Static scan of pickle files and torch checkpoints: what would loading them import and call?

Nothing is ever unpickled and no model library is imported. A bounded decoder walks the
opcodes (argument layouts from `pickletools.opcodes`), keeps a symbolic stack and memo so that
STACK_GLOBAL operands pushed as strings, fetched from the memo or duplicated are resolved the
way the unpickler would resolve them, and classifies every imported name
(`classify_global`, module classify):

    dangerous  a known code-execution path (DANGEROUS_MODULES, DANGEROUS_NAMES, a name that
               runs code in any module, an attribute path reaching one such as
               `posixpath.os.system`, or a walk through a dunder such as `__globals__`)
    safe       exactly on SAFE_GLOBALS, a small allowlist modelled on torch's weights-only
               unpickler
    unknown    anything else: importing a module runs its code, so "not known bad" is not clean

The stack also remembers which imported name each value is, and what a call returned, so every
call is judged by what it calls: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ and INST calling a name off the
allowlist are dangerous (loading runs it), and so is a call of anything that is not an imported
name (what another call returned, a memo slot never filled) and BUILD on an imported name
itself (it sets attributes on a class, function or module). A name off the allowlist that is
only referenced, never called, is unknown.

Formats (`PickleScan.format`) are sniffed from the content, never from the file name:

    pickle        a pickle stream; bytes after its STOP are reported and scanned as more pickles
    torch-legacy  torch.save(..., _use_new_zipfile_serialization=False): starts 80 02 8a 0a (the
                  magic-number pickle); five pickles follow each other, then raw storage bytes
    torch-zip     a zip archive holding `<folder>/data.pkl` (torch.save since torch 1.6)
    npy           a NumPy array (magic \x93NUMPY): an object dtype means the data is a pickle,
                  scanned; a plain dtype is raw data, not read (lineage/formats/npy.py)
    npz           a zip archive of .npy members (numpy.savez), each judged as above
    compressed-pickle  a zlib, gzip, bz2, xz or lzma stream (joblib's compress=): inflated as it
                  is decoded, never past max_member_bytes (lineage/formats/compressed.py)
    zip           any other zip archive

`pickle_kind(path)` answers the same question before any scan, for a folder's file list: it
also recognises protocol 0 and 1 pickles, which have no header, by decoding their first opcodes
strictly (see decodes_as_pickle), and compressed pickles by inflating their first bytes.

Zip members are sniffed by content: a member starting with a PROTO header (80 00..05) or named
*.pkl / *.pickle is scanned as a pickle; a member starting PK\\x03\\x04 is scanned as a nested
archive, one starting \\x93NUMPY or named *.npy as an array; anything else (torch's `data/N`
storage blobs, `version`, `byteorder`) is skipped after reading its first bytes. A `data/N` blob
that starts like a pickle is scanned too, and dropped as tensor data only if it neither parses
nor names a global. Reads are bounded: at most `max_member_bytes` of any one stream (never more
decompressed output than that), `max_total_bytes` over the whole scan, nesting to `max_depth`.

Finding kinds (severity):

    dangerous-global    (dangerous)     GLOBAL / INST / STACK_GLOBAL names a code-execution path
    dangerous-call      (dangerous)     a call opcode calls a name off the allowlist, or BUILD sets
                                        state on an imported name itself
    unresolved-call     (dangerous)     a call opcode calls a value that is not an imported name
    unresolved-global   (dangerous)     STACK_GLOBAL operands that are not plain strings (built by
                                        a call, taken from a missing memo slot), or EXT1/2/4,
                                        which import through the copyreg extension registry
    zip-slip            (dangerous)     an archive member name is absolute, contains `..` or NUL
    unknown-global      (unknown)       a name that is neither allowlisted nor known dangerous
    data-after-stop     (unknown)       bytes follow the STOP of a pickle (another pickle.load
                                        would read them); they are scanned as further pickles
    duplicate-member    (unknown)       two archive entries share a name: readers disagree on which
    local-name-mismatch (unknown)       a member's local header names it otherwise than the central
                                        directory does; the bytes the directory points at (what
                                        torch loads) are scanned
    compression-bomb    (unknown)       a compressed member over 1 MiB declares a ratio above
                                        MAX_COMPRESSION_RATIO, or any size above max_member_bytes
    unknown-opcode      (unverifiable)  a byte that is no pickle opcode: decoding stops there
    broken-opcode       (unverifiable)  a truncated or invalid argument, or no STOP: decoding stops
    stack-error         (unverifiable)  an opcode pops below a MARK or from an empty stack
    memo-trick          (unverifiable)  GET of a memo index that was never PUT
    depth-limit         (unverifiable)  a nested pickle or archive beyond max_depth, not scanned
    scan-limit          (unverifiable)  a byte, pickle-count or directory cap stopped the scan
    encrypted-member    (unverifiable)  an encrypted archive member (never decrypted)
    unsupported-compression (unverifiable)  a compression method zipfile cannot read
    crc-mismatch        (unverifiable)  a member read in full does not match its CRC-32
    bad-zip             (unverifiable)  the archive or a member header cannot be read
    read-error          (unverifiable)  the operating system failed a read
    legacy-layout       (unverifiable)  a legacy torch file ends before its five pickles
    more-findings       (worst severity held back)  the per-scan finding cap was reached
    calls               (info)          counts of REDUCE / BUILD / NEWOBJ / OBJ / INST per pickle
    persistent-id       (info)          PERSID / BINPERSID: resolved by the loader (torch storages)
    nested-pickle       (info)          a bytes / str value (raw, latin-1, base64 or hex text)
                                        holds a pickle, scanned under member
                                        `<member>@<byte offset>`; what it imports is reported
                                        with its own severity
    nested-archive      (info)          an archive member is itself a zip; its members are
                                        scanned as `<outer>!<inner>`
    storage-data        (info)          raw tensor bytes after a legacy file's five pickles
    pickle-like-data    (info)          a `data/N` blob that starts like a pickle but is not one
    npy-array           (info)          a NumPy array's header: dtype, shape, pickle or plain data
    bad-npy             (unverifiable)  an unreadable .npy header, or a dtype not known as plain
                                        data (what follows is then scanned as a pickle)
    compressed          (info)          the file is zlib / gzip / bz2 / xz / lzma compressed (as
                                        joblib writes): the inflated stream is scanned

`PickleScan.verdict` is "dangerous" if any finding is dangerous, "unknown" if any is unknown or
unverifiable, else "ok": only when every global is on the allowlist and nothing else is called.
"unknown" is never "ok". `scan_pickle_file` raises InputError only when the file cannot be
opened; every problem in its content becomes a finding. CRC-32 is checked for the members read
in full (pickles, nested archives), not for skipped storage blobs.

The package, one module per job (names without an underscore in them are shared between
the modules; what callers may use is `__all__` below):

    scan      `scan_pickle_file`, `scan_pickle_bytes`: a file's format from its first bytes,
              then the scan that format needs
    sniff     `pickle_kind`, `pickle_kind_of`, `may_be_pickle`: what a file could unpickle,
              told without a scan
    findings  the results (`GlobalRef`, `PickleFinding`, `PickleScan`), the caps and the state
              one scan keeps (`Scan`)
    source    bounded reads (`Source`) and the count of bytes read from disk
    opcodes   argument layouts, stack effects and the values on the symbolic stack
    decoder   the opcode-stream scanner (`Decoder`, `scan_pickles`) and nested pickles
    handlers  what each opcode that matters does to the decoder's stack (`HANDLERS`)
    archive   zip members and .npy arrays
    classify  `classify_global`: the allowlist, the blocklist and attribute paths
"""

from lineage.formats.pickle_scan.classify import (
    DANGEROUS_LAST_NAMES,
    DANGEROUS_MODULES,
    DANGEROUS_NAMES,
    SAFE_GLOBALS,
    classify_global,
)
from lineage.formats.pickle_scan.findings import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MEMBER_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    FINDING_KINDS,
    SEVERITIES,
    GlobalRef,
    PickleFinding,
    PickleScan,
)
from lineage.formats.pickle_scan.scan import scan_pickle_bytes, scan_pickle_file
from lineage.formats.pickle_scan.sniff import (
    SNIFF_WINDOW,
    may_be_pickle,
    pickle_kind,
    pickle_kind_of,
)

__all__ = [
    "DANGEROUS_LAST_NAMES",
    "DANGEROUS_MODULES",
    "DANGEROUS_NAMES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MEMBER_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "FINDING_KINDS",
    "GlobalRef",
    "PickleFinding",
    "PickleScan",
    "SAFE_GLOBALS",
    "SEVERITIES",
    "SNIFF_WINDOW",
    "classify_global",
    "may_be_pickle",
    "pickle_kind",
    "pickle_kind_of",
    "scan_pickle_bytes",
    "scan_pickle_file",
]
