"""What each pickle opcode that matters does to the decoder's symbolic stack.

One handler per opcode (`HANDLERS`): imports (GLOBAL, INST, STACK_GLOBAL, EXT*) are named and
classified, calls (REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST, BUILD) judged by what they call, memo
slots tracked so fetched and duplicated operands resolve as the unpickler resolves them, and
string and bytes values checked for nested pickles. Opcodes without a handler get their
`pickletools` stack effect in the decoder module.
"""

from __future__ import annotations

import codecs
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from lineage.formats.messages import show as _show
from lineage.formats.pickle_scan.findings import Scan
from lineage.formats.pickle_scan.opcodes import HIGHEST_PROTOCOL, Imported, Made, Stop, Token, Value


class Decoding(Protocol):
    """What a handler uses of the decoder (`Decoder`, module decoder)."""

    stack: list[Value]
    memo: dict[int, Value]
    calls: Counter[str]
    persistent: int
    member: str | None
    scan: Scan

    def finding(self, kind: str, severity: str, detail: str) -> None: ...
    def stack_error(self, pos: int, what: str) -> None: ...
    def pop(self, pos: int, name: str) -> Value: ...
    def top(self, pos: int, name: str) -> Value: ...
    def pop_to_mark(self, pos: int, name: str) -> list[Value]: ...
    def imported(self, module: str, name: str, opcode: str, pos: int) -> Imported: ...
    def call(self, callee: Value, opcode: str, pos: int) -> Made: ...
    def unresolved(self, pos: int, what: str) -> None: ...
    def check_nested(self, value: bytes | str, pos: int) -> None: ...


def _h_proto(decoder: Decoding, arg: object, pos: int) -> bool:
    assert isinstance(arg, int)
    if arg > HIGHEST_PROTOCOL:
        raise Stop(
            "broken-opcode", "unverifiable", f"PROTO {arg} at byte {pos}: no such pickle protocol"
        )
    return False


def _h_nothing(decoder: Decoding, arg: object, pos: int) -> bool:
    return False  # FRAME only groups opcodes; the stream is decoded the same way without it


def _h_stop(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.pop(pos, "STOP")
    return True


def _h_mark(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.stack.append(Token.MARK)
    return False


def _h_pop(decoder: Decoding, arg: object, pos: int) -> bool:
    if decoder.stack:  # POP removes a MARK as well as an object (the C unpickler's rule)
        decoder.stack.pop()
    else:
        decoder.stack_error(pos, "POP on an empty stack")
    return False


def _h_dup(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.stack.append(decoder.top(pos, "DUP"))
    return False


def _h_memoize(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.memo[len(decoder.memo)] = decoder.top(pos, "MEMOIZE")
    return False


def _h_put(decoder: Decoding, arg: object, pos: int) -> bool:
    index = _memo_index(arg, pos, "PUT")
    decoder.memo[index] = decoder.top(pos, "PUT")
    return False


def _h_get(decoder: Decoding, arg: object, pos: int) -> bool:
    index = _memo_index(arg, pos, "GET")
    if index not in decoder.memo:
        decoder.finding(
            "memo-trick", "unverifiable", f"GET of memo index {index} at byte {pos}, never PUT"
        )
    decoder.stack.append(decoder.memo.get(index, Token.OPAQUE))
    return False


def _memo_index(arg: object, pos: int, name: str) -> int:
    if isinstance(arg, int):
        return arg
    assert isinstance(arg, bytes)  # the text forms carry a decimal line
    try:
        index = int(arg.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise Stop(
            "broken-opcode", "unverifiable", f"{name} at byte {pos}: bad memo index {arg[:40]!r}"
        ) from None
    if index < 0:
        raise Stop("broken-opcode", "unverifiable", f"{name} at byte {pos}: negative memo index")
    return index


def _h_global(decoder: Decoding, arg: object, pos: int) -> bool:
    module, name = _global_names(arg, pos, "GLOBAL")
    decoder.stack.append(decoder.imported(module, name, "GLOBAL", pos))
    return False


def _h_inst(decoder: Decoding, arg: object, pos: int) -> bool:
    module, name = _global_names(arg, pos, "INST")
    callee = decoder.imported(module, name, "INST", pos)
    decoder.pop_to_mark(pos, "INST")
    decoder.stack.append(decoder.call(callee, "INST", pos))
    return False


def _h_reduce(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.pop(pos, "REDUCE")  # the argument tuple
    callee = decoder.pop(pos, "REDUCE")
    decoder.stack.append(decoder.call(callee, "REDUCE", pos))
    return False


def _h_newobj(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.pop(pos, "NEWOBJ")
    callee = decoder.pop(pos, "NEWOBJ")  # cls.__new__(cls, *args)
    decoder.stack.append(decoder.call(callee, "NEWOBJ", pos))
    return False


def _h_newobj_ex(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.pop(pos, "NEWOBJ_EX")
    decoder.pop(pos, "NEWOBJ_EX")
    callee = decoder.pop(pos, "NEWOBJ_EX")  # cls.__new__(cls, *args, **kwargs)
    decoder.stack.append(decoder.call(callee, "NEWOBJ_EX", pos))
    return False


def _h_obj(decoder: Decoding, arg: object, pos: int) -> bool:
    items = decoder.pop_to_mark(pos, "OBJ")  # MARK cls args...: cls(*args)
    callee = items[0] if items else Token.OPAQUE
    if not items:
        decoder.stack_error(pos, "OBJ finds no class after its MARK")
    decoder.stack.append(decoder.call(callee, "OBJ", pos))
    return False


def _h_build(decoder: Decoding, arg: object, pos: int) -> bool:
    """BUILD calls obj.__setstate__(state), or sets attributes: judged by what obj is."""
    decoder.calls["BUILD"] += 1
    decoder.pop(pos, "BUILD")
    target = decoder.top(pos, "BUILD")
    if isinstance(target, Imported):
        detail = (
            f"BUILD at byte {pos} sets state on {_show(target.module)} {_show(target.name)} "
            "itself (an imported class, function or module), which no saved object needs"
        )
        key = (decoder.member, f"{target.module} {target.name}", "build")
        decoder.scan.collector.add_once(key, "dangerous-call", "dangerous", detail)
    return False


def _global_names(arg: object, pos: int, opcode: str) -> tuple[str, str]:
    assert isinstance(arg, tuple)
    try:  # the unpickler decodes both lines as UTF-8
        return arg[0].decode("utf-8"), arg[1].decode("utf-8")
    except UnicodeDecodeError:
        raise Stop(
            "broken-opcode", "unverifiable", f"{opcode} at byte {pos}: names are not UTF-8"
        ) from None


def _h_stack_global(decoder: Decoding, arg: object, pos: int) -> bool:
    name = decoder.pop(pos, "STACK_GLOBAL")
    module = decoder.pop(pos, "STACK_GLOBAL")
    if isinstance(module, str) and isinstance(name, str):
        decoder.stack.append(decoder.imported(module, name, "STACK_GLOBAL", pos))
        return False
    decoder.unresolved(
        pos,
        "STACK_GLOBAL operands are not strings pushed by this pickle: what it imports "
        "cannot be told without running it",
    )
    decoder.stack.append(Token.OPAQUE)
    return False


def _h_ext(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.unresolved(
        pos, f"extension code {arg} imports through copyreg's registry, unknown here"
    )
    decoder.stack.append(Token.OPAQUE)
    return False


def _h_persid(decoder: Decoding, arg: object, pos: int) -> bool:
    decoder.persistent += 1
    if arg is None:  # BINPERSID takes the id from the stack
        decoder.pop(pos, "BINPERSID")
    decoder.stack.append(Token.OPAQUE)
    return False


def _h_string(decoder: Decoding, arg: object, pos: int) -> bool:
    """STRING / BINSTRING / SHORT_BINSTRING: byte strings read as text (ASCII by default)."""
    value: Value = Token.OPAQUE
    if isinstance(arg, bytes):
        decoder.check_nested(arg, pos)
        value = arg.decode("latin-1")
    decoder.stack.append(value)
    return False


def _h_quoted_string(decoder: Decoding, arg: object, pos: int) -> bool:
    """STRING (protocol 0): a quoted, backslash-escaped line."""
    assert isinstance(arg, bytes)
    if len(arg) < 2 or arg[0] != arg[-1] or arg[:1] not in (b"'", b'"'):
        raise Stop(
            "broken-opcode", "unverifiable", f"STRING at byte {pos}: argument is not quoted"
        )
    try:
        with warnings.catch_warnings(action="ignore"):  # "invalid escape" warnings: data, not code
            raw = codecs.escape_decode(arg[1:-1])[0]
    except ValueError:
        raise Stop("broken-opcode", "unverifiable", f"STRING at byte {pos}: bad escape") from None
    return _h_string(decoder, raw, pos)


def _h_unicode_line(decoder: Decoding, arg: object, pos: int) -> bool:
    """UNICODE (protocol 0): raw-unicode-escape, so `\\u006fs` is "os"."""
    assert isinstance(arg, bytes)
    try:
        value = arg.decode("raw-unicode-escape")
    except UnicodeDecodeError:
        raise Stop("broken-opcode", "unverifiable", f"UNICODE at byte {pos}: bad escape") from None
    decoder.check_nested(value, pos)
    decoder.stack.append(value)
    return False


def _h_unicode(decoder: Decoding, arg: object, pos: int) -> bool:
    value: Value = Token.OPAQUE
    if isinstance(arg, bytes):
        try:
            value = arg.decode("utf-8", "surrogatepass")  # what the unpickler accepts
        except UnicodeDecodeError:
            raise Stop(
                "broken-opcode", "unverifiable", f"string at byte {pos} is not UTF-8"
            ) from None
        decoder.check_nested(value, pos)
    decoder.stack.append(value)
    return False


def _h_bytes(decoder: Decoding, arg: object, pos: int) -> bool:
    if isinstance(arg, bytes):
        decoder.check_nested(arg, pos)
    decoder.stack.append(Token.OPAQUE)  # STACK_GLOBAL needs str: bytes never name a global
    return False


Handler = Callable[[Decoding, object, int], bool]
HANDLERS: dict[str, Handler] = {
    "PROTO": _h_proto,
    "FRAME": _h_nothing,
    "STOP": _h_stop,
    "MARK": _h_mark,
    "POP": _h_pop,
    "DUP": _h_dup,
    "MEMOIZE": _h_memoize,
    "PUT": _h_put,
    "BINPUT": _h_put,
    "LONG_BINPUT": _h_put,
    "GET": _h_get,
    "BINGET": _h_get,
    "LONG_BINGET": _h_get,
    "GLOBAL": _h_global,
    "INST": _h_inst,
    "REDUCE": _h_reduce,
    "NEWOBJ": _h_newobj,
    "NEWOBJ_EX": _h_newobj_ex,
    "OBJ": _h_obj,
    "BUILD": _h_build,
    "STACK_GLOBAL": _h_stack_global,
    "EXT1": _h_ext,
    "EXT2": _h_ext,
    "EXT4": _h_ext,
    "PERSID": _h_persid,
    "BINPERSID": _h_persid,
    "STRING": _h_quoted_string,
    "BINSTRING": _h_string,
    "SHORT_BINSTRING": _h_string,
    "UNICODE": _h_unicode_line,
    "SHORT_BINUNICODE": _h_unicode,
    "BINUNICODE": _h_unicode,
    "BINUNICODE8": _h_unicode,
    "BINBYTES": _h_bytes,
    "SHORT_BINBYTES": _h_bytes,
    "BINBYTES8": _h_bytes,
    "BYTEARRAY8": _h_bytes,
}
