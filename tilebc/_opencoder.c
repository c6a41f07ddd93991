/* The bytecode writer's loop over a block's ops, in C (part of tilebc._speedups; the Python twin
 * is ModuleWriter.ops / op_at / op in tilebc/binary/writer.py, and tests/test_speedups.py compares
 * the bytes of both).
 *
 * encode_ops(writer, ops, out, numbering, locs, item_read)
 *
 * writer._encoder_context holds (type_ids, debug_ids, programs, unplaced_globals, attr_blobs,
 * Value); the loop calls the writer's methods type, debug_attr, op_at, _attr_bytes and
 * _encoder_program by name (held in the tuple they would make a cycle through the writer).
 * programs maps id(spec) to the kind's program made by _encoder_program, or None for kinds `op`
 * always writes:
 *
 *   (spec, opcode bytes, flags, most results, flag steps, attribute steps, operand mode,
 *    operand steps)
 *
 * An op is written here into a scratch buffer and committed (its bytes appended to out.buf, its
 * location index to locs, its results numbered) only once all of it was written. Anything unusual
 * (a value not numbered, a missing attribute, a flag or attribute the target version lacks, a
 * callback that raised, a global still to place) drops the scratch and hands the op to
 * op_at(ops, index, out, numbering, locs, item_read), so every error and its order are those of
 * the Python writer. Table entries a dropped op interned are interned again, in the same order,
 * by `op`: the tables only grow by first use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "_speedups.h"

static PyObject *s_spec, *s_results, *s_operands, *s_attrs, *s_loc, *s_type, *s_buf,
    *s_encoder_context, *s_debug_attr, *s_op_at, *s_attr_bytes, *s_encoder_program;
/* an op's fields as its slots hold them (compact or a dict: tilebc_fields_get reads both) */
static TilebcSlotCache slot_operands = TILEBC_RAW_SLOT, slot_attrs = TILEBC_RAW_SLOT;

enum { P_COUNTED = 1, P_HAS_FLAGS = 2, P_ITEM_READ_HEAD = 4, P_SYMBOLS = 8 };
enum { A_ENUM = 0, A_BYTES = 1, A_NEWER = 2 };
enum { M_FIXED = 0, M_SEGMENTED = 1, M_FLAT = 2 };
enum { R_ONE = 0, R_OPTIONAL = 1, R_VARIADIC = 2 };

typedef struct {
    unsigned char *data;
    Py_ssize_t size, alloc;
    unsigned char small[256];
} Scratch;

static int grow(Scratch *s, Py_ssize_t more) {
    if (s->size + more <= s->alloc)
        return 0;
    Py_ssize_t alloc = (s->size + more) * 2;
    unsigned char *data = PyMem_Malloc(alloc);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(data, s->data, s->size);
    if (s->data != s->small)
        PyMem_Free(s->data);
    s->data = data;
    s->alloc = alloc;
    return 0;
}

static int put_varint(Scratch *s, unsigned long long value) {
    if (grow(s, 10) < 0)
        return -1;
    while (value >= 0x80) {
        s->data[s->size++] = (unsigned char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    s->data[s->size++] = (unsigned char)value;
    return 0;
}

static int put_bytes(Scratch *s, const char *bytes, Py_ssize_t count) {
    if (grow(s, count) < 0)
        return -1;
    memcpy(s->data + s->size, bytes, count);
    s->size += count;
    return 0;
}

/* A table index or value number: a non-negative int (anything else: -1, no exception). */
static int put_index(Scratch *s, PyObject *index) {
    if (!PyLong_CheckExact(index))
        return -1;
    unsigned long long value = PyLong_AsUnsignedLongLong(index);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return put_varint(s, value) < 0 ? -2 : 0;
}

typedef struct {
    PyObject *writer, *type_ids, *debug_ids, *programs, *unplaced, *attr_blobs;
    PyTypeObject *value_class;
} Context;

/* The index a `seen` dict (id -> (object, index)) holds for `object`, else what the writer's
 * method `fn(object)` returns; NULL with an exception when that raised. */
static PyObject *interned(PyObject *writer, PyObject *seen, PyObject *fn, PyObject *object) {
    PyObject *index = tilebc_pair_by_id(seen, object);
    if (index != NULL)
        return Py_NewRef(index);
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallMethodOneArg(writer, fn, object);
}

/* The number `numbering` gives `value` (borrowed), or NULL (no exception) where it has none. */
static PyObject *number_of(PyObject *numbering, PyObject *value) {
    PyObject *found = tilebc_by_id(numbering, value);
    if (found == NULL)
        tilebc_recoverable();  /* a fatal one stays set: encode_one's fallback raises it */
    return found;
}

static int put_number(Scratch *s, PyObject *numbering, PyObject *value) {
    PyObject *number = number_of(numbering, value);
    return number == NULL ? -1 : put_index(s, number);
}

/* The group `name` of `dict` (borrowed; Py_None when absent). */
static PyObject *group_of(PyObject *dict, PyObject *name) {
    PyObject *found = tilebc_fields_get(dict, name);
    if (found == NULL) {
        tilebc_recoverable();  /* a fatal one stays set: encode_one's fallback raises it */
        return Py_None;
    }
    return found;
}

/* A variadic group's values: a tuple or list (NULL: anything else); `None` is empty. */
static PyObject *values_of(PyObject *group) {
    if (group == Py_None)
        return PyTuple_New(0);
    if (PyTuple_CheckExact(group) || PyList_CheckExact(group))
        return PySequence_Fast(group, "");
    return NULL;
}

/* Writes one op into `s`. 1: written (*loc_index and the op's results for the commit); 0: the
 * op is not for this loop (op_at writes it); -1: an error to raise (memory). */
static int encode_one(Scratch *s, PyObject *op, PyObject *program, PyObject *numbering,
                      const Context *context, PyObject **loc_index, PyObject **results) {
    int status = 0;
    PyObject *operands = NULL, *attrs = NULL, *loc = NULL;
    *loc_index = NULL;
    *results = NULL;
    Py_ssize_t flags = PyLong_AsSsize_t(PyTuple_GET_ITEM(program, 2));
    if ((flags & P_SYMBOLS) && PyDict_GET_SIZE(context->unplaced) > 0)
        return 0;  /* `op` places the global the op names first */
    loc = PyObject_GetAttr(op, s_loc);
    operands = tilebc_slot(op, s_operands, &slot_operands);
    attrs = tilebc_slot(op, s_attrs, &slot_attrs);
    *results = PyObject_GetAttr(op, s_results);
    if (loc == NULL || operands == NULL || attrs == NULL || *results == NULL) {
        goto recover;
    }
    if (!tilebc_is_fields(operands) || !tilebc_is_fields(attrs) || !PyList_CheckExact(*results))
        goto fallback;
    /* the location is interned before anything of the op, as in `op` */
    if (loc == Py_None) {
        *loc_index = PyLong_FromLong(0);
    } else {
        *loc_index = interned(context->writer, context->debug_ids, s_debug_attr, loc);
        if (*loc_index == NULL || !PyLong_CheckExact(*loc_index)) {
            goto recover;
        }
    }
    if (*loc_index == NULL)
        goto error;
    PyObject *opcode = PyTuple_GET_ITEM(program, 1);
    if (put_bytes(s, PyBytes_AS_STRING(opcode), PyBytes_GET_SIZE(opcode)) < 0)
        goto error;
    Py_ssize_t count = PyList_GET_SIZE(*results);
    if (count > PyLong_AsSsize_t(PyTuple_GET_ITEM(program, 3)))
        goto fallback;  /* results the version lacks: `op` leaves them out */
    if ((flags & P_COUNTED) && put_varint(s, (unsigned long long)count) < 0)
        goto error;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value_type = PyObject_GetAttr(PyList_GET_ITEM(*results, i), s_type);
        if (value_type == NULL) {
            goto recover;
        }
        PyObject *index = interned(context->writer, context->type_ids, s_type, value_type);
        Py_DECREF(value_type);
        if (index == NULL) {
            goto recover;
        }
        int put = put_index(s, index);
        Py_DECREF(index);
        if (put == -2)
            goto error;
        if (put < 0)
            goto fallback;
    }
    /* flags: (name, is_operand, unit, bit or -1 where the version lacks it) */
    PyObject *flag_steps = PyTuple_GET_ITEM(program, 4);
    unsigned long long bits = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(flag_steps); i++) {
        PyObject *step = PyTuple_GET_ITEM(flag_steps, i);
        PyObject *name = PyTuple_GET_ITEM(step, 0);
        int present;
        if (PyTuple_GET_ITEM(step, 1) == Py_True) {
            present = group_of(operands, name) != Py_None;
        } else {
            PyObject *value = group_of(attrs, name);
            if (PyTuple_GET_ITEM(step, 2) == Py_True) {
                present = PyObject_IsTrue(value);
                if (present < 0) {
                    goto recover;
                }
            } else {
                present = value != Py_None;
            }
        }
        if (!present)
            continue;
        long bit = PyLong_AsLong(PyTuple_GET_ITEM(step, 3));
        if (bit < 0 || bit > 63)
            goto fallback;  /* set where the version has no such flag: `op` refuses it */
        bits |= 1ULL << bit;
    }
    if ((flags & P_HAS_FLAGS) && put_varint(s, bits) < 0)
        goto error;
    /* attributes: (name, mode, optional, attr, enum class, members -> number) */
    PyObject *attr_steps = PyTuple_GET_ITEM(program, 5);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(attr_steps); i++) {
        PyObject *step = PyTuple_GET_ITEM(attr_steps, i);
        PyObject *value = group_of(attrs, PyTuple_GET_ITEM(step, 0));
        long mode = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
        if (value == Py_None) {
            if (PyTuple_GET_ITEM(step, 2) == Py_True || mode == A_NEWER)
                continue;
            goto fallback;  /* a default to supply, or the error for a missing one */
        }
        if (mode == A_NEWER)
            goto fallback;
        if (mode == A_ENUM && Py_TYPE(value) == (PyTypeObject *)PyTuple_GET_ITEM(step, 4)) {
            PyObject *number = PyDict_GetItemWithError(PyTuple_GET_ITEM(step, 5), value);
            if (number != NULL) {
                int put = put_index(s, number);
                if (put == -2)
                    goto error;
                if (put < 0)
                    goto fallback;
                continue;
            }
            if (!tilebc_recoverable())
                goto error;
        }
        /* the bytes _attr_bytes made for this very object, else its call (which keeps them) */
        PyObject *kept = tilebc_by_id(context->attr_blobs, value);
        if (kept == NULL && PyErr_Occurred())
            goto error;
        PyObject *blob;
        if (kept != NULL && PyTuple_CheckExact(kept) && PyTuple_GET_SIZE(kept) == 3
                && PyTuple_GET_ITEM(kept, 0) == value
                && PyTuple_GET_ITEM(kept, 1) == PyTuple_GET_ITEM(step, 3)) {
            blob = Py_NewRef(PyTuple_GET_ITEM(kept, 2));
        } else {
            if (!tilebc_recoverable())
                goto error;
            PyObject *call[4] = {context->writer, op, PyTuple_GET_ITEM(step, 3), value};
            blob = PyObject_VectorcallMethod(s_attr_bytes, call,
                                             4, NULL);
        }
        if (blob == NULL || !PyBytes_CheckExact(blob)) {
            Py_XDECREF(blob);
            goto recover;
        }
        int put = put_bytes(s, PyBytes_AS_STRING(blob), PyBytes_GET_SIZE(blob));
        Py_DECREF(blob);
        if (put < 0)
            goto error;
    }
    /* operands: (name, arity) in the mode's layout */
    long mode = PyLong_AsLong(PyTuple_GET_ITEM(program, 6));
    PyObject *operand_steps = PyTuple_GET_ITEM(program, 7);
    Py_ssize_t steps = PyTuple_GET_SIZE(operand_steps);
    if (mode == M_FLAT) {  /* the count of all values, then each */
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < steps; i++) {
            PyObject *step = PyTuple_GET_ITEM(operand_steps, i);
            PyObject *group = group_of(operands, PyTuple_GET_ITEM(step, 0));
            if (PyLong_AsLong(PyTuple_GET_ITEM(step, 1)) == R_VARIADIC) {
                if (group != Py_None && !PyTuple_CheckExact(group) && !PyList_CheckExact(group))
                    goto fallback;
                total += group == Py_None ? 0 : PySequence_Fast_GET_SIZE(group);
            } else {
                total += 1;
            }
        }
        if (put_varint(s, (unsigned long long)total) < 0)
            goto error;
    }
    for (Py_ssize_t i = 0; i < steps; i++) {
        PyObject *step = PyTuple_GET_ITEM(operand_steps, i);
        PyObject *group = group_of(operands, PyTuple_GET_ITEM(step, 0));
        long arity = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
        if (arity == R_VARIADIC && mode != M_FIXED) {
            PyObject *values = values_of(group);
            if (values == NULL)
                goto recover;
            int failed = 0;
            if (mode == M_SEGMENTED)
                failed = put_varint(s, (unsigned long long)PySequence_Fast_GET_SIZE(values)) < 0
                    ? -2 : 0;
            for (Py_ssize_t j = 0; !failed && j < PySequence_Fast_GET_SIZE(values); j++)
                failed = put_number(s, numbering, PySequence_Fast_GET_ITEM(values, j));
            Py_DECREF(values);
            if (failed == -2)
                goto error;
            if (failed)
                goto fallback;
            continue;
        }
        if (group == Py_None && arity == R_OPTIONAL && mode == M_SEGMENTED)
            continue;
        if (Py_TYPE(group) != context->value_class)
            goto fallback;  /* `op` names the missing operand */
        int put = put_number(s, numbering, group);
        if (put == -2)
            goto error;
        if (put < 0)
            goto fallback;
    }
    if (PyErr_Occurred())
        goto recover;
    status = 1;
    goto done;
recover:  /* a callback raised: an ordinary exception is the Python writer's to raise again */
    if (!tilebc_recoverable())
        goto error;
fallback:
    status = PyErr_Occurred() ? -1 : 0;
    goto done;
error:
    status = -1;
done:
    Py_XDECREF(loc);
    Py_XDECREF(operands);
    Py_XDECREF(attrs);
    if (status != 1) {
        Py_CLEAR(*loc_index);
        Py_CLEAR(*results);
    }
    return status;
}

/* Appends the op's bytes, its location index and its results' numbers. */
static int commit(Scratch *s, PyObject *buf, PyObject *locs, PyObject *numbering,
                  PyObject *loc_index, PyObject *results) {
    Py_ssize_t size = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, size + s->size) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(buf) + size, s->data, s->size);
    if (PyList_Append(locs, loc_index) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(results); i++) {
        PyObject *id = PyLong_FromVoidPtr(PyList_GET_ITEM(results, i));
        PyObject *number = PyLong_FromSsize_t(PyDict_GET_SIZE(numbering));
        int failed = id == NULL || number == NULL || PyDict_SetItem(numbering, id, number) < 0;
        Py_XDECREF(id);
        Py_XDECREF(number);
        if (failed)
            return -1;
    }
    return 0;
}

static int read_context(PyObject *writer, Context *context) {
    PyObject *tuple = PyObject_GetAttr(writer, s_encoder_context);
    if (tuple == NULL)
        return -1;
    int ok = PyTuple_CheckExact(tuple) && PyTuple_GET_SIZE(tuple) == 6;
    if (ok) {
        PyObject **items = &PyTuple_GET_ITEM(tuple, 0);
        ok = PyDict_CheckExact(items[0]) && PyDict_CheckExact(items[1])
            && PyDict_CheckExact(items[2]) && PyDict_CheckExact(items[3])
            && PyDict_CheckExact(items[4]) && PyType_Check(items[5]);
        if (ok) {
            context->writer = writer;
            context->type_ids = items[0];
            context->debug_ids = items[1];
            context->programs = items[2];
            context->unplaced = items[3];
            context->attr_blobs = items[4];
            context->value_class = (PyTypeObject *)items[5];
        }
    }
    /* the writer holds the tuple (and so everything in it) for as long as this call runs */
    Py_DECREF(tuple);
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "encode_ops: writer._encoder_context is not the "
                        "(type_ids, debug_ids, programs, unplaced_globals, attr_blobs, Value) "
                        "tuple");
    return ok ? 0 : -1;
}

/* The kind's program (borrowed from programs) or Py_None; NULL on an error. */
static PyObject *program_of(const Context *context, PyObject *spec) {
    PyObject *program = tilebc_by_id(context->programs, spec);
    if (program == NULL && !PyErr_Occurred()) {
        PyObject *made = PyObject_CallMethodOneArg(context->writer, s_encoder_program, spec);
        Py_XDECREF(made);  /* _encoder_program stored it in programs */
        program = made == NULL ? NULL : tilebc_by_id(context->programs, spec);
        if (program == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "encode_ops: _encoder_program stored no program");
    }
    if (program != NULL && program != Py_None
            && !(PyTuple_CheckExact(program) && PyTuple_GET_SIZE(program) == 8
                 && PyTuple_GET_ITEM(program, 0) == spec)) {
        /* a stale entry (a spec freed and its id reused) or a malformed one: `op` writes it */
        return Py_None;
    }
    return program;
}

static PyObject *encode_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "encode_ops(writer, ops, out, numbering, locs, "
                        "item_read) takes 6 arguments");
        return NULL;
    }
    PyObject *writer = args[0], *out = args[2], *numbering = args[3], *locs = args[4];
    int item_read = PyObject_IsTrue(args[5]);
    if (item_read < 0)
        return NULL;
    if (!PyDict_CheckExact(numbering) || !PyList_CheckExact(locs)) {
        PyErr_SetString(PyExc_TypeError, "encode_ops: numbering must be a dict, locs a list");
        return NULL;
    }
    Context context;
    if (read_context(writer, &context) < 0)
        return NULL;
    PyObject *buf = PyObject_GetAttr(out, s_buf);
    if (buf == NULL)
        return NULL;
    if (!PyByteArray_CheckExact(buf)) {
        Py_DECREF(buf);
        PyErr_SetString(PyExc_TypeError, "encode_ops: out.buf must be a bytearray");
        return NULL;
    }
    PyObject *ops = PySequence_Tuple(args[1]);  /* a copy: the callbacks are Python code */
    if (ops == NULL) {
        Py_DECREF(buf);
        return NULL;
    }
    Scratch scratch;
    scratch.data = scratch.small;
    scratch.alloc = sizeof(scratch.small);
    PyObject *result = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(ops);
    for (Py_ssize_t index = 0; index < count; index++) {
        /* a long block is one call: let Ctrl-C in as the interpreter's own loop would */
        if (index % 4096 == 4095 && PyErr_CheckSignals() < 0)
            goto done;
        PyObject *op = PyTuple_GET_ITEM(ops, index);
        PyObject *spec = PyObject_GetAttr(op, s_spec);
        if (spec == NULL)
            goto done;
        PyObject *program = program_of(&context, spec);
        Py_DECREF(spec);
        if (program == NULL)
            goto done;
        int status = 0;
        if (program != Py_None) {
            Py_INCREF(program);
            Py_ssize_t flags = PyLong_AsSsize_t(PyTuple_GET_ITEM(program, 2));
            PyObject *loc_index = NULL, *results = NULL;
            /* an item read ahead of a reshape: op_at registers the item's type first */
            if (!(item_read && (flags & P_ITEM_READ_HEAD) && index + 1 < count)) {
                scratch.size = 0;
                status = encode_one(&scratch, op, program, numbering, &context, &loc_index,
                                    &results);
                if (status == 1) {
                    if (commit(&scratch, buf, locs, numbering, loc_index, results) < 0)
                        status = -1;
                    Py_DECREF(loc_index);
                    Py_DECREF(results);
                }
            }
            Py_DECREF(program);
            if (status < 0)
                goto done;
        }
        if (status == 0) {
            PyObject *position = PyLong_FromSsize_t(index);
            if (position == NULL)
                goto done;
            PyObject *call[7] = {writer, ops, position, out, numbering, locs, args[5]};
            PyObject *outcome = PyObject_VectorcallMethod(s_op_at, call, 7, NULL);
            Py_DECREF(position);
            if (outcome == NULL)
                goto done;
            Py_DECREF(outcome);
        }
    }
    result = Py_NewRef(Py_None);
done:
    if (scratch.data != scratch.small)
        PyMem_Free(scratch.data);
    Py_DECREF(ops);
    Py_DECREF(buf);
    return result;
}

static PyMethodDef encoder_functions[] = {
    {"encode_ops", (PyCFunction)(void (*)(void))encode_ops, METH_FASTCALL,
     "encode_ops(writer, ops, out, numbering, locs, item_read): ModuleWriter.ops's loop, the "
     "usual ops written here, the rest by writer.op_at"},
    {NULL, NULL, 0, NULL},
};

int add_op_encoder(PyObject *module) {
    static PyObject **names[] = {&s_spec, &s_results, &s_operands, &s_attrs, &s_loc, &s_type,
                                 &s_buf, &s_encoder_context, &s_debug_attr, &s_op_at,
                                 &s_attr_bytes, &s_encoder_program};
    static const char *texts[] = {"spec", "results", "operands", "attrs", "loc", "type", "buf",
                                  "_encoder_context", "debug_attr", "op_at", "_attr_bytes",
                                  "_encoder_program"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL)
            return -1;
    }
    return PyModule_AddFunctions(module, encoder_functions);
}
