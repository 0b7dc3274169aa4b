"""Dumps the raw memory of a few code objects and their strings, with the
line of every instruction as CPython itself reports it, for the decoding
unit tests of profiler/src/python (fixtures in profiler/src/python/testdata).

    python3.X tests/python/dump_code_fixture.py > profiler/src/python/testdata/py3X.json
"""
import ctypes
import json
import sys


def sample_function(items):
    total = 0
    for item in items:
        if item % 3 == 0:
            total += item
        else:
            total -= 1
    text = "{}-{}".format(
        total,
        len(items),
    )
    return text


class Ünicode:
    def méthode(self, x):
        return [y * 2 for y in range(x)]


def raw(addr, size):
    return ctypes.string_at(addr, size).hex()


def lines_by_unit(code):
    out = {}
    if sys.version_info >= (3, 11):
        for index, pos in enumerate(code.co_positions()):
            out[index] = pos[0]
    else:
        for start, end, line in code.co_lines():
            for byte in range(start, end, 2):
                out[byte // 2] = line
    return [[k, v] for k, v in sorted(out.items())]


def string_bytes(s):
    # Enough for the header of any compact string plus its characters.
    return raw(id(s), 72 + 4 * len(s) + 4)


def entry(code):
    return {
        "name": code.co_name,
        "filename": code.co_filename,
        "code_addr": id(code),
        "code_bytes": raw(id(code), 256),
        "name_addr": id(code.co_name),
        "qualname_addr": id(code.co_qualname) if sys.version_info >= (3, 11) else None,
        "name_bytes": string_bytes(code.co_name),
        "filename_addr": id(code.co_filename),
        "linetable_addr": id(code.co_linetable),
        "linetable_bytes": raw(id(code.co_linetable), 32 + len(code.co_linetable)),
        "firstlineno": code.co_firstlineno,
        "lines": lines_by_unit(code),
    }


codes = [sample_function.__code__, Ünicode.méthode.__code__]
codes += [c for c in Ünicode.méthode.__code__.co_consts if hasattr(c, "co_code")]
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "code_type_addr": id(type(sample_function.__code__)),
    "functions": [entry(c) for c in codes],
}, indent=1))
