/* Prints the CPython struct offsets storprof's Python frame walk uses
 * (profiler/src/python/offsets.rs), from an installed interpreter's headers:
 *   V=3.11; P=/root/.pyenv/versions/3.11.7
 *   gcc -I$P/include/python$V -I$P/include/python$V/internal offsets.c -o off && ./off
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#else
#include <frameobject.h>
#endif
#define P(name, expr) printf("%-32s %zu\n", name, (size_t)(expr))
int main(void) {
    printf("version %x\n", PY_VERSION_HEX);
    P("runtime.interpreters.head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030B0000
    P("interp.threads.head", offsetof(PyInterpreterState, threads.head));
    P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
#else
    P("interp.tstate_head", offsetof(PyInterpreterState, tstate_head));
    P("runtime.gilstate.tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
#endif
    P("tstate.next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030D0000
    P("tstate.current_frame", offsetof(PyThreadState, current_frame));
    P("frame.f_executable", offsetof(_PyInterpreterFrame, f_executable));
    P("frame.instr_ptr", offsetof(_PyInterpreterFrame, instr_ptr));
#elif PY_VERSION_HEX >= 0x030B0000
    P("tstate.cframe", offsetof(PyThreadState, cframe));
    P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
    P("frame.f_code", offsetof(_PyInterpreterFrame, f_code));
    P("frame.prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
    P("tstate.frame", offsetof(PyThreadState, frame));
    P("frame.f_back", offsetof(PyFrameObject, f_back));
    P("frame.f_code", offsetof(PyFrameObject, f_code));
    P("frame.f_lasti", offsetof(PyFrameObject, f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030B0000
    P("frame.previous", offsetof(_PyInterpreterFrame, previous));
    P("frame.owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
    P("frame.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
    P("code.co_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
    P("code.co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("code.co_filename", offsetof(PyCodeObject, co_filename));
    P("code.co_name", offsetof(PyCodeObject, co_name));
    P("code.co_linetable", offsetof(PyCodeObject, co_linetable));
    P("sizeof(PyASCIIObject)", sizeof(PyASCIIObject));
    P("sizeof(PyCompactUnicodeObject)", sizeof(PyCompactUnicodeObject));
    return 0;
}
