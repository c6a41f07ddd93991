/* OpDecoder: one op kind's fast decoder, in C (part of tilebc._speedups).
 *
 * tilebc/binary/fastpath.py turns an op's plan (plans.py, made from the op table) into a program
 * tuple and, where this type is built, into an OpDecoder instead of generated Python. Called as
 * decoder(mr, reader, data, pos, end, values, preorder, pending, depth, offset), it returns
 * (op, pos) exactly as the generated Python function does, and raises the reader's Bail (or lets
 * any other exception through) for anything unusual: the careful reader then decodes the whole
 * body again and says what is wrong. Tagged attributes, arrays other than i32/i64, hints,
 * constants not yet in the reader's cache, regions and the defaults of attributes newer than the
 * file are read by Python callbacks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#include "_speedups.h"

enum { A_READ = 0, A_UNIT = 1, A_OPTIONAL = 2, A_ABSENT = 3 };
enum { K_ENUM = 0, K_INT = 1, K_BOOL = 2, K_TYPE = 3, K_STRING = 4, K_SYMBOL = 5, K_CALL = 6,
       K_I32_ARRAY = 7, K_I64_ARRAY = 8, K_DENSE = 9, K_TAGGED = 10, K_BOOL_ARRAY = 11 };
enum { M_FIXED = 0, M_SEGMENTED = 1, M_FLAT = 2 };
enum { R_ONE = 0, R_OPTIONAL = 1, R_VARIADIC = 2 };

enum {  /* the member descriptors the decoder stores through (Op's and Value's slots) */
    D_SPEC, D_OPERANDS, D_ATTRS, D_RESULTS, D_REGIONS, D_OFFSET, D_LOC,
    D_VALUE_TYPE, D_VALUE_OWNER, D_VALUE_INDEX, D_COUNT
};

typedef struct {
    PyObject *name;
    int action, bit, kind, width;
    PyObject *extra;  /* K_ENUM: {int: member}; K_CALL, K_DENSE and K_TAGGED: f(mr, reader,
                       * data, pos, rtypes), the latter two for what mr._dense or
                       * mr._attr_cache does not hold yet */
    int div_by, bounded;  /* K_TAGGED: the tags of the `assume` predicates looked up here */
} AttrStep;

typedef struct {
    PyObject *name;
    int arity, bit;
} OperandStep;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *program;  /* the tuple it was made from: keeps every object below alive */
    PyObject *spec, *synthesized, *pending;
    /* the names of the op's compact fields (see tilebc_compact_fields), or NULL where its class
     * takes dicts: its operand steps', its attribute steps' then its pending defaults' */
    PyObject *operand_names, *attr_names;
    PyObject *no_fields;  /* with them: the compact fields of none, shared (it is immutable) */
    int counted, variadic_results, has_flags, mode;
    Py_ssize_t n_results, num_fixed, n_regions, n_attrs, n_operands;
    uint64_t known_flags;
    AttrStep *attrs;
    OperandStep *operands;
    PyTypeObject *op_type, *value_type;
    PyObject *bail;
    PyObject *descriptors[D_COUNT];
    /* where each slot lies in the new objects the decoder fills (tp_alloc'd: every slot empty),
     * written there directly; -1: through the descriptor */
    Py_ssize_t offsets[D_COUNT];
} OpDecoder;

static PyObject *s_types, *s_string_cache, *s_default_for, *s_dense, *s_operands, *s_attrs;

typedef struct {
    const unsigned char *data;
    Py_ssize_t size, pos;
    Py_ssize_t end;  /* the body's end: counts are checked against it, as the Python decoder does */
    PyObject *types;  /* mr._types while decode_ops runs (borrowed: mr holds it), else NULL */
} Cursor;

static int bail(OpDecoder *self) {
    PyErr_SetNone(self->bail);
    return -1;
}

/* A varint as the Python decoder reads it (varint_tail): at most 64 bits and within the data,
 * else `refusal` is raised (NULL: -1 without an exception). */
static int read_varint_or(PyObject *refusal, Cursor *c, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (c->pos >= c->size || (shift == 63 && (c->data[c->pos] & 0x7F) > 1)) {
            if (refusal != NULL)
                PyErr_SetNone(refusal);
            return -1;
        }
        unsigned int byte = c->data[c->pos++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        if (shift > 63) {
            if (refusal != NULL)
                PyErr_SetNone(refusal);
            return -1;
        }
    }
    *out = result;
    return 0;
}

static int read_varint(OpDecoder *self, Cursor *c, uint64_t *out) {
    return read_varint_or(self->bail, c, out);
}

static int store(OpDecoder *self, int which, PyObject *object, PyObject *value) {
    Py_ssize_t offset = self->offsets[which];
    if (offset >= 0) {
        PyObject **slot = (PyObject **)((char *)object + offset);
        PyObject *old = *slot;
        *slot = Py_NewRef(value);
        Py_XDECREF(old);
        return 0;
    }
    PyObject *descriptor = self->descriptors[which];
    return Py_TYPE(descriptor)->tp_descr_set(descriptor, object, value);
}

/* dict.get(key) of an attribute of `owner` (mr._types, mr._string_cache): a new reference or
 * NULL without an error when absent. */
static PyObject *cached(PyObject *owner, PyObject *attribute, uint64_t key) {
    PyObject *table = PyObject_GetAttr(owner, attribute);
    if (table == NULL)
        return NULL;
    PyObject *number = PyLong_FromUnsignedLongLong(key);
    if (number == NULL) {
        Py_DECREF(table);
        return NULL;
    }
    PyObject *found = PyDict_Check(table) ? PyDict_GetItemWithError(table, number) : NULL;
    Py_XINCREF(found);
    Py_DECREF(number);
    Py_DECREF(table);
    return found;
}

/* mr.type(k, 0) where mr._types lacks k (the careful reader's lookup and checks) */
static PyObject *type_ref(OpDecoder *self, PyObject *mr, Cursor *c) {
    uint64_t key;
    if (read_varint(self, c, &key) < 0)
        return NULL;
    PyObject *found;
    if (c->types != NULL) {
        PyObject *number = PyLong_FromUnsignedLongLong(key);
        found = number == NULL ? NULL : PyDict_GetItemWithError(c->types, number);
        Py_XINCREF(found);
        Py_XDECREF(number);
    } else {
        found = cached(mr, s_types, key);
    }
    if (found != NULL || PyErr_Occurred())
        return found;
    return PyObject_CallMethod(mr, "type", "Ki", (unsigned long long)key, 0);
}

static PyObject *value_ref(OpDecoder *self, PyObject *values, Cursor *c) {
    uint64_t key;
    if (read_varint(self, c, &key) < 0)
        return NULL;
    if (key >= (uint64_t)PyList_GET_SIZE(values)) {
        bail(self);
        return NULL;
    }
    PyObject *value = PyList_GET_ITEM(values, (Py_ssize_t)key);
    Py_INCREF(value);
    return value;
}

/* The value of a callback's (value, pos) answer, which it takes over, and the position in *pos;
 * NULL with an exception for anything else (a negative position included). */
static PyObject *take_pair(PyObject *answer, Py_ssize_t *pos) {
    if (answer == NULL)
        return NULL;
    PyObject *value = NULL;
    if (PyTuple_Check(answer) && PyTuple_GET_SIZE(answer) == 2) {
        *pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(answer, 1));
        if (*pos >= 0) {
            value = PyTuple_GET_ITEM(answer, 0);
            Py_INCREF(value);
        }
    }
    if (value == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "expected (value, position) from a decoding callback");
    Py_DECREF(answer);
    return value;
}

/* f(mr, reader, data, pos, rtypes) -> (value, pos) */
static PyObject *call_reader(OpDecoder *self, PyObject *function, PyObject *mr, PyObject *reader,
                             PyObject *data, Cursor *c, PyObject *rtypes) {
    PyObject *pos = PyLong_FromSsize_t(c->pos);
    if (pos == NULL)
        return NULL;
    PyObject *result = PyObject_CallFunctionObjArgs(function, mr, reader, data, pos, rtypes, NULL);
    Py_DECREF(pos);
    Py_ssize_t after;
    PyObject *value = take_pair(result, &after);
    if (value != NULL)
        c->pos = after;
    return value;
}

static PyObject *s_attr_cache;

/* A zigzag varint (fastpath._signed) into a new int; NULL without an error: not readable. */
static PyObject *read_signed(Cursor *c) {
    uint64_t raw;
    if (read_varint_or(NULL, c, &raw) < 0)
        return NULL;
    return PyLong_FromLongLong((long long)(raw >> 1) ^ -(long long)(raw & 1));
}

/* The attribute mr._attr_cache holds for the div_by or bounded attribute at c (a new reference,
 * c moved past it), as fast_tagged keys it: (tag, lower, upper) or (tag, divisor, every, along),
 * None for an absent part. NULL without an error: another tag, unusual bytes, or not cached. */
static PyObject *tagged_cached(AttrStep *step, PyObject *mr, Cursor *c) {
    if (c->pos >= c->size)
        return NULL;
    int tag = c->data[c->pos++];
    if (tag != step->bounded && tag != step->div_by)
        return NULL;
    PyObject *parts[4] = {NULL, NULL, NULL, NULL}, *key = NULL, *found = NULL;
    int count = tag == step->bounded ? 3 : 4, next = 1;
    uint64_t number, flags;
    parts[0] = PyLong_FromLong((long)tag);
    if (parts[0] == NULL)
        goto done;
    if (tag == step->div_by) {
        if (read_varint_or(NULL, c, &number) < 0
                || (parts[next++] = PyLong_FromUnsignedLongLong(number)) == NULL)
            goto done;
    }
    if (read_varint_or(NULL, c, &flags) < 0 || (flags & ~(uint64_t)3))
        goto done;
    for (int bit = 0; bit < 2; bit++, next++) {
        parts[next] = flags & ((uint64_t)1 << bit) ? read_signed(c) : Py_NewRef(Py_None);
        if (parts[next] == NULL)
            goto done;
    }
    key = PyTuple_New(count);
    if (key == NULL)
        goto done;
    for (int i = 0; i < count; i++) {
        PyTuple_SET_ITEM(key, i, parts[i]);
        parts[i] = NULL;
    }
    PyObject *cache = PyObject_GetAttr(mr, s_attr_cache);
    if (cache == NULL)
        goto done;
    if (PyDict_CheckExact(cache)) {
        found = PyDict_GetItemWithError(cache, key);
        Py_XINCREF(found);
    }
    Py_DECREF(cache);
done:
    for (int i = 0; i < 4; i++)
        Py_XDECREF(parts[i]);
    Py_XDECREF(key);
    return found;
}

/* varint count, then `width`-byte little-endian signed numbers, as a tuple of ints (the careful
 * reader's int_array; its smallest and largest values are refused there, so they bail here) */
/* An array's varint count, when `count` items of `width` bytes fit in what is left: 0; else
 * -1 (bailed, or an error set). */
static int read_count(OpDecoder *self, Cursor *c, int width, uint64_t *count) {
    if (read_varint(self, c, count) < 0)
        return -1;
    if (c->pos > c->end || c->end > c->size
            || *count > (uint64_t)(c->end - c->pos) / (uint64_t)width) {
        bail(self);
        return -1;
    }
    return 0;
}

static PyObject *read_int_array(OpDecoder *self, Cursor *c, int width) {
    uint64_t count;
    if (read_count(self, c, width, &count) < 0)
        return NULL;
    PyObject *numbers = PyTuple_New((Py_ssize_t)count);
    if (numbers == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        uint64_t raw = 0;
        for (int b = width - 1; b >= 0; b--)
            raw = raw << 8 | c->data[c->pos + b];
        c->pos += width;
        long long value;
        if (width == 4) {
            value = (int32_t)(uint32_t)raw;
            if (value == INT32_MIN || value == INT32_MAX)
                goto refused;
        } else {
            value = (long long)raw;
            if (value == INT64_MIN || value == INT64_MAX)
                goto refused;
        }
        PyObject *number = PyLong_FromLongLong(value);
        if (number == NULL) {
            Py_DECREF(numbers);
            return NULL;
        }
        PyTuple_SET_ITEM(numbers, i, number);
    }
    return numbers;
refused:
    Py_DECREF(numbers);
    bail(self);
    return NULL;
}

/* A bool array: a varint count, then a byte of 0 or 1 each (any other byte: the careful reader,
 * which reads it leniently). */
static PyObject *read_bool_array(OpDecoder *self, Cursor *c) {
    uint64_t count;
    if (read_count(self, c, 1, &count) < 0)
        return NULL;
    PyObject *flags = PyTuple_New((Py_ssize_t)count);
    if (flags == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        unsigned int byte = c->data[c->pos++];
        if (byte > 1) {
            Py_DECREF(flags);
            bail(self);
            return NULL;
        }
        PyTuple_SET_ITEM(flags, i, PyBool_FromLong(byte));
    }
    return flags;
}

static PyObject *read_attr(OpDecoder *self, AttrStep *step, PyObject *mr, PyObject *reader,
                           PyObject *data, Cursor *c, PyObject *rtypes) {
    uint64_t key;
    switch (step->kind) {
    case K_ENUM: {
        if (read_varint(self, c, &key) < 0)
            return NULL;
        PyObject *number = PyLong_FromUnsignedLongLong(key);
        if (number == NULL)
            return NULL;
        PyObject *member = PyDict_GetItemWithError(step->extra, number);
        Py_DECREF(number);
        if (member == NULL) {
            if (!PyErr_Occurred())
                bail(self);
            return NULL;
        }
        Py_INCREF(member);
        return member;
    }
    case K_INT: {
        if (read_varint(self, c, &key) < 0)
            return NULL;
        int width = step->width;
        if (width < 64 && (key >> width)) {
            bail(self);
            return NULL;
        }
        if (width > 1 && ((key >> (width - 1)) & 1)) {  /* negative: key - 2**width */
            if (width == 64)
                return PyLong_FromLongLong((long long)key);
            return PyLong_FromLongLong(-(long long)(((uint64_t)1 << width) - key));
        }
        return PyLong_FromUnsignedLongLong(key);
    }
    case K_BOOL: {
        if (c->pos >= c->size) {
            bail(self);
            return NULL;
        }
        unsigned int byte = c->data[c->pos++];
        if (byte > 1) {
            bail(self);
            return NULL;
        }
        return PyBool_FromLong(byte == 1);
    }
    case K_TYPE:
        return type_ref(self, mr, c);
    case K_STRING:
    case K_SYMBOL: {
        if (read_varint(self, c, &key) < 0)
            return NULL;
        PyObject *text = cached(mr, s_string_cache, key);
        if (text == NULL) {
            if (PyErr_Occurred())
                return NULL;
            text = PyObject_CallMethod(mr, "string", "Ki", (unsigned long long)key, 0);
            if (text == NULL)
                return NULL;
        }
        if (step->kind == K_SYMBOL) {
            int truth = PyObject_IsTrue(text);
            if (truth <= 0) {
                Py_DECREF(text);
                if (truth == 0)
                    bail(self);
                return NULL;
            }
        }
        return text;
    }
    case K_CALL:
        return call_reader(self, step->extra, mr, reader, data, c, rtypes);
    case K_TAGGED: {
        /* div_by and bounded: mr._attr_cache[key] by fast_tagged's key when it holds it; the
         * first of a kind and anything unusual through fast_tagged (extra) */
        Cursor before = *c;
        PyObject *found = tagged_cached(step, mr, c);
        if (found != NULL || PyErr_Occurred())
            return found;
        *c = before;
        return call_reader(self, step->extra, mr, reader, data, c, rtypes);
    }
    case K_I32_ARRAY:
    case K_I64_ARRAY:
        return read_int_array(self, c, step->kind == K_I32_ARRAY ? 4 : 8);
    case K_BOOL_ARRAY:
        return read_bool_array(self, c);
    case K_DENSE: {
        /* mr._dense[(index, type)]: the reader's attribute of that constant at that type, made
         * by mr.dense (through extra) the first time */
        if (PyList_GET_SIZE(rtypes) == 0) {
            bail(self);
            return NULL;
        }
        Cursor before = *c;
        if (read_varint(self, c, &key) < 0)
            return NULL;
        PyObject *table = PyObject_GetAttr(mr, s_dense);
        if (table == NULL)
            return NULL;
        PyObject *found = NULL;
        if (PyDict_Check(table)) {
            PyObject *lookup = Py_BuildValue("(KO)", (unsigned long long)key,
                                             PyList_GET_ITEM(rtypes, 0));
            if (lookup == NULL) {
                Py_DECREF(table);
                return NULL;
            }
            found = PyDict_GetItemWithError(table, lookup);
            Py_XINCREF(found);
            Py_DECREF(lookup);
        }
        Py_DECREF(table);
        if (found != NULL || PyErr_Occurred())
            return found;
        *c = before;
        return call_reader(self, step->extra, mr, reader, data, c, rtypes);
    }
    }
    bail(self);
    return NULL;
}

static PyObject *new_value(OpDecoder *self, PyObject *type, PyObject *owner_ref, Py_ssize_t index) {
    PyObject *value = self->value_type->tp_alloc(self->value_type, 0);
    if (value == NULL)
        return NULL;
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL || store(self, D_VALUE_TYPE, value, type) < 0
            || store(self, D_VALUE_OWNER, value, owner_ref) < 0
            || store(self, D_VALUE_INDEX, value, number) < 0) {
        Py_XDECREF(number);
        Py_DECREF(value);
        return NULL;
    }
    Py_DECREF(number);
    return value;
}

/* The op's operands in declaration order: a dict, as the generated decoder builds it, or the
 * same as compact fields. */
static PyObject *read_operands(OpDecoder *self, Cursor *c, PyObject *values, uint64_t flags) {
    uint64_t total = 0;
    if (self->mode == M_FLAT) {
        if (read_varint(self, c, &total) < 0)
            return NULL;
        if ((Py_ssize_t)total > c->end - c->pos || total > (uint64_t)PY_SSIZE_T_MAX
                || total < (uint64_t)self->num_fixed) {
            bail(self);
            return NULL;
        }
    }
    if (self->operand_names != NULL && self->n_operands == 0)
        return Py_NewRef(self->no_fields);
    PyObject *operands = self->operand_names != NULL ? PyTuple_New(self->n_operands + 1)
                                                     : PyDict_New();
    if (operands == NULL)
        return NULL;
    if (self->operand_names != NULL)
        PyTuple_SET_ITEM(operands, 0, Py_NewRef(self->operand_names));
    for (Py_ssize_t i = 0; i < self->n_operands; i++) {
        OperandStep *step = &self->operands[i];
        PyObject *group;
        if (step->arity == R_ONE || self->mode == M_FIXED) {
            group = value_ref(self, values, c);
        } else if (step->arity == R_OPTIONAL && self->mode == M_SEGMENTED) {
            if (step->bit >= 0 && (flags >> step->bit) & 1) {
                group = value_ref(self, values, c);
            } else {
                group = Py_None;
                Py_INCREF(group);
            }
        } else {
            uint64_t count;
            if (self->mode == M_SEGMENTED) {
                if (read_varint(self, c, &count) < 0)
                    goto fail;
                if (count > (uint64_t)PY_SSIZE_T_MAX || (Py_ssize_t)count > c->end - c->pos) {
                    bail(self);
                    goto fail;
                }
            } else {
                count = total - (uint64_t)self->num_fixed;
            }
            group = PyTuple_New((Py_ssize_t)count);
            for (Py_ssize_t k = 0; group != NULL && k < (Py_ssize_t)count; k++) {
                PyObject *value = value_ref(self, values, c);
                if (value == NULL)
                    Py_CLEAR(group);
                else
                    PyTuple_SET_ITEM(group, k, value);
            }
        }
        if (group == NULL)
            goto fail;
        if (self->operand_names != NULL) {
            PyTuple_SET_ITEM(operands, i + 1, group);
            continue;
        }
        int failed = PyDict_SetItem(operands, step->name, group);
        Py_DECREF(group);
        if (failed < 0)
            goto fail;
    }
    return operands;
fail:
    Py_DECREF(operands);
    return NULL;
}

/* One op from `c` (moved past it): the op, a new reference, or NULL with an exception. `args`
 * are the decoder's (mr, reader, data, pos, end, values, preorder, pending, depth, offset) of
 * which `pos` is not read (the cursor holds it) and `offset` is the op's, given as `offset`. */
static PyObject *decode_op(OpDecoder *self, PyObject *const *args, Cursor *cursor,
                           PyObject *offset) {
    PyObject *mr = args[0], *reader = args[1], *data = args[2], *values = args[5],
             *preorder = args[6], *pending = args[7], *depth = args[8];
    if (!PyList_Check(values) || !PyList_Check(preorder))
        return bail(self), NULL;
    Cursor c = *cursor;
    PyObject *op = NULL, *rtypes = NULL, *attrs = NULL, *operands = NULL, *regions = NULL,
             *results = NULL, *owner_ref = NULL, *answer = NULL;
    if (c.pos < 0) {
        bail(self);
        goto done;
    }
    op = self->op_type->tp_alloc(self->op_type, 0);
    if (op == NULL || PyList_Append(preorder, op) < 0)
        goto done;
    /* result types */
    Py_ssize_t n = self->n_results;
    if (self->counted) {
        uint64_t count;
        if (read_varint(self, &c, &count) < 0)
            goto done;
        if (self->variadic_results
                ? count > (uint64_t)PY_SSIZE_T_MAX || (Py_ssize_t)count > c.end - c.pos
                : count != (uint64_t)self->n_results) {
            bail(self);
            goto done;
        }
        n = (Py_ssize_t)count;
    }
    rtypes = PyList_New(n);
    if (rtypes == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *type = type_ref(self, mr, &c);
        if (type == NULL)
            goto done;
        PyList_SET_ITEM(rtypes, i, type);
    }
    /* flags */
    uint64_t flags = 0;
    if (self->has_flags) {
        if (read_varint(self, &c, &flags) < 0)
            goto done;
        if (flags & ~self->known_flags) {
            bail(self);
            goto done;
        }
    }
    /* attributes, in plan order, then the defaults that depend on operands */
    Py_ssize_t n_pending = PyTuple_GET_SIZE(self->pending);
    attrs = self->attr_names == NULL ? PyDict_New()
            : self->n_attrs + n_pending == 0 ? Py_NewRef(self->no_fields)
            : PyTuple_New(self->n_attrs + n_pending + 1);
    if (attrs == NULL)
        goto done;
    if (self->attr_names != NULL && attrs != self->no_fields) {
        PyTuple_SET_ITEM(attrs, 0, Py_NewRef(self->attr_names));
        for (Py_ssize_t i = 1; i <= self->n_attrs + n_pending; i++)  /* complete if we fail */
            PyTuple_SET_ITEM(attrs, i, Py_NewRef(Py_None));
    }
    for (Py_ssize_t i = 0; i < self->n_attrs; i++) {
        AttrStep *step = &self->attrs[i];
        PyObject *value;
        if (step->action == A_READ) {
            value = read_attr(self, step, mr, reader, data, &c, rtypes);
        } else if (step->action == A_UNIT) {
            value = PyBool_FromLong(self->has_flags && step->bit < 63 && ((flags >> step->bit) & 1));
        } else if (step->action == A_OPTIONAL && step->bit < 64 && ((flags >> step->bit) & 1)) {
            value = read_attr(self, step, mr, reader, data, &c, rtypes);
        } else {
            value = Py_None;
            Py_INCREF(value);
        }
        if (value == NULL)
            goto done;
        if (self->attr_names != NULL) {
            Py_DECREF(PyTuple_GET_ITEM(attrs, i + 1));  /* the None put there */
            PyTuple_SET_ITEM(attrs, i + 1, value);
            continue;
        }
        int failed = PyDict_SetItem(attrs, step->name, value);
        Py_DECREF(value);
        if (failed < 0)
            goto done;
    }
    operands = read_operands(self, &c, values, flags);
    if (operands == NULL)
        goto done;
    if (n_pending) {
        /* default_for reads the operands as the dict the op's users see: the op keeps it */
        PyObject *groups = self->operand_names != NULL ? tilebc_fields_dict(operands)
                                                       : Py_NewRef(operands);
        if (groups == NULL)
            goto done;
        Py_SETREF(operands, Py_NewRef(groups));
        for (Py_ssize_t i = 0; i < n_pending; i++) {
            PyObject *attr = PyTuple_GET_ITEM(self->pending, i);
            PyObject *value = PyObject_CallMethodOneArg(attr, s_default_for, groups);
            if (value == NULL) {
                Py_DECREF(groups);
                goto done;
            }
            if (self->attr_names != NULL) {
                Py_DECREF(PyTuple_GET_ITEM(attrs, self->n_attrs + i + 1));
                PyTuple_SET_ITEM(attrs, self->n_attrs + i + 1, value);
                continue;
            }
            PyObject *name = PyObject_GetAttrString(attr, "name");
            int failed = name == NULL || PyDict_SetItem(attrs, name, value) < 0;
            Py_XDECREF(name);
            Py_DECREF(value);
            if (failed) {
                Py_DECREF(groups);
                goto done;
            }
        }
        Py_DECREF(groups);
    }
    /* regions (nested ops follow this one in pre-order) */
    if (self->n_regions) {
        uint64_t count;
        if (read_varint(self, &c, &count) < 0)
            goto done;
        if (count != (uint64_t)self->n_regions) {
            bail(self);
            goto done;
        }
        regions = PyList_New(0);
        long inner = PyLong_AsLong(depth);
        if (regions == NULL || (inner == -1 && PyErr_Occurred()))
            goto done;
        for (Py_ssize_t i = 0; i < self->n_regions; i++) {
            Py_ssize_t after;
            PyObject *region = take_pair(
                PyObject_CallMethod(mr, "_fast_region", "OOnOOOOl", reader, data, c.pos, args[4],
                                    values, preorder, pending, inner + 1), &after);
            int failed = region == NULL || PyList_Append(regions, region) < 0;
            Py_XDECREF(region);
            if (failed)
                goto done;
            c.pos = after;
        }
    } else {
        regions = PyTuple_New(0);
        if (regions == NULL)
            goto done;
    }
    if (store(self, D_SPEC, op, self->spec) < 0 || store(self, D_OPERANDS, op, operands) < 0
            || store(self, D_ATTRS, op, attrs) < 0 || store(self, D_REGIONS, op, regions) < 0
            || store(self, D_OFFSET, op, offset) < 0
            || (pending != Py_None && store(self, D_LOC, op, pending) < 0))
        goto done;
    /* results: the serialized ones are values in scope, the synthesized ones are not */
    Py_ssize_t total = n + PyTuple_GET_SIZE(self->synthesized);
    results = PyList_New(total);
    if (results == NULL)
        goto done;
    if (total) {
        owner_ref = PyWeakref_NewRef(op, NULL);
        if (owner_ref == NULL)
            goto done;
    }
    for (Py_ssize_t i = 0; i < total; i++) {
        PyObject *type = i < n ? PyList_GET_ITEM(rtypes, i)
                               : PyTuple_GET_ITEM(self->synthesized, i - n);
        PyObject *value = new_value(self, type, owner_ref, i);
        if (value == NULL)
            goto done;
        PyList_SET_ITEM(results, i, value);
        if (i < n && PyList_Append(values, value) < 0)
            goto done;
    }
    if (store(self, D_RESULTS, op, results) < 0)
        goto done;
    answer = Py_NewRef(op);
    cursor->pos = c.pos;
done:
    Py_XDECREF(op);
    Py_XDECREF(rtypes);
    Py_XDECREF(attrs);
    Py_XDECREF(operands);
    Py_XDECREF(regions);
    Py_XDECREF(results);
    Py_XDECREF(owner_ref);
    return answer;
}

/* The decoder called from Python: (op, pos) as the generated Python function answers. */
static PyObject *decode(OpDecoder *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 10 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "OpDecoder takes (mr, reader, data, pos, end, values, "
                                         "preorder, pending, depth, offset)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Cursor c = {view.buf, view.len, PyLong_AsSsize_t(args[3]), 0, NULL};
    PyObject *op = NULL, *answer = NULL;
    if (!(c.pos == -1 && PyErr_Occurred())) {
        c.end = PyLong_AsSsize_t(args[4]);
        if (!(c.end == -1 && PyErr_Occurred()))
            op = decode_op(self, args, &c, args[9]);
    }
    PyBuffer_Release(&view);
    if (op != NULL) {
        answer = Py_BuildValue("(On)", op, c.pos);
        Py_DECREF(op);
    }
    return answer;
}

static PyTypeObject OpDecoderType;

/* decode_ops(mr, reader, data, pos, end, values, preorder, pending, depth, base, decoders, count):
 * the ops of a body (count < 0: up to `end`) or of a block (`count` of them), each by
 * decoders[opcode] or mr._fast_decoder(opcode), as the reader's Python loops did; returns
 * (ops, pos). The caller checks the position and the values' bound, as before. */
static PyObject *decode_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "decode_ops takes 12 arguments");
        return NULL;
    }
    PyObject *mr = args[0], *data = args[2], *decoders = args[10];
    Py_ssize_t numbers[4];
    const int positions[4] = {3, 4, 9, 11};
    for (int i = 0; i < 4; i++) {
        numbers[i] = PyLong_AsSsize_t(args[positions[i]]);
        if (numbers[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t pos = numbers[0], end = numbers[1], base = numbers[2], count = numbers[3];
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_ops: negative position");
        return NULL;
    }
    if (!PyDict_Check(decoders)) {
        PyErr_SetString(PyExc_TypeError, "decode_ops: decoders must be a dict");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Cursor c = {view.buf, view.len, pos, end, NULL};
    /* mr._types looked up once for the body's type references (held while the loop runs) */
    PyObject *types = PyObject_GetAttr(mr, s_types);
    if (types != NULL && PyDict_CheckExact(types))
        c.types = types;
    else
        PyErr_Clear();  /* each reference asks mr */
    PyObject *ops = PyList_New(0), *call[10], *answer = NULL;
    if (ops == NULL)
        goto done;
    for (int i = 0; i < 9; i++)
        call[i] = args[i];
    for (Py_ssize_t done_ops = 0; count < 0 ? pos < end : done_ops < count; done_ops++) {
        if (done_ops % 4096 == 4095 && PyErr_CheckSignals() < 0)
            goto done;  /* a long body is one call: let Ctrl-C in */
        Py_ssize_t start = pos;
        uint64_t opcode;
        c.pos = pos;
        /* an opcode past the data or over 64 bits: the Python loop's IndexError or Bail */
        if (read_varint_or(PyExc_ValueError, &c, &opcode) < 0)
            goto done;
        pos = c.pos;
        PyObject *key = PyLong_FromUnsignedLongLong(opcode);
        if (key == NULL)
            goto done;
        PyObject *decoder = PyDict_GetItemWithError(decoders, key);
        Py_XINCREF(decoder);
        if (decoder == NULL && !PyErr_Occurred())
            decoder = PyObject_CallMethod(mr, "_fast_decoder", "O", key);
        Py_DECREF(key);
        if (decoder == NULL)
            goto done;
        PyObject *offset = PyLong_FromSsize_t(base + start), *op = NULL;
        Py_ssize_t after = pos;
        if (offset != NULL && Py_TYPE(decoder) == &OpDecoderType) {
            c.pos = pos;  /* c.end is the body's end, as args[4] says */
            op = decode_op((OpDecoder *)decoder, call, &c, offset);
            after = c.pos;
        } else if (offset != NULL) {
            PyObject *position = PyLong_FromSsize_t(pos);
            if (position != NULL) {
                call[3] = position;
                call[9] = offset;
                op = take_pair(PyObject_Vectorcall(decoder, call, 10, NULL), &after);
                /* released below: not left for a later call to read (call[9] is `base`
                 * again, what the other decoders take there) */
                call[3] = args[3];
                call[9] = args[9];
                Py_DECREF(position);
            }
        }
        Py_XDECREF(offset);
        Py_DECREF(decoder);
        int failed = op == NULL || PyList_Append(ops, op) < 0;
        Py_XDECREF(op);
        if (failed)
            goto done;
        pos = after;
    }
    answer = Py_BuildValue("(On)", ops, pos);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(types);
    Py_XDECREF(ops);
    return answer;
}

/* The fields of one plain location entry, as the reader's _plain_loc reads it: the tag, then four
 * varints (scope, file name, line, column) filling the entry exactly. 0 when the entry is not one
 * (the careful path then reads it). */
static int plain_loc_fields(const unsigned char *data, Py_ssize_t pos, Py_ssize_t stop,
                            unsigned char tag, uint64_t fields[4]) {
    if (stop - pos < 5 || data[pos] != tag)
        return 0;
    Cursor c = {data, stop, pos + 1, stop, NULL};
    for (int i = 0; i < 4; i++)
        if (read_varint_or(NULL, &c, &fields[i]) < 0)
            return 0;
    return c.pos == stop;
}

static PyObject *s_scope, *s_filename, *s_line, *s_column, *s_class;

/* A `loc_type` (DILoc) with its four fields set as its __init__ sets them. */
static PyObject *make_loc(PyTypeObject *loc_type, PyObject *scope, PyObject *name,
                          uint64_t line, uint64_t column) {
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL)
        return NULL;
    PyObject *loc = loc_type->tp_new(loc_type, empty, NULL);
    Py_DECREF(empty);
    if (loc == NULL)
        return NULL;
    PyObject *line_value = PyLong_FromUnsignedLongLong(line);
    PyObject *column_value = PyLong_FromUnsignedLongLong(column);
    if (line_value == NULL || column_value == NULL
            || PyObject_GenericSetAttr(loc, s_scope, scope) < 0
            || PyObject_GenericSetAttr(loc, s_filename, name) < 0
            || PyObject_GenericSetAttr(loc, s_line, line_value) < 0
            || PyObject_GenericSetAttr(loc, s_column, column_value) < 0)
        Py_CLEAR(loc);
    Py_XDECREF(line_value);
    Py_XDECREF(column_value);
    return loc;
}

/* What plain_locations reads entries with. */
typedef struct {
    const unsigned char *bytes;
    Py_ssize_t size;
    PyObject *offsets;
    Py_ssize_t n_offsets;
    PyObject *debug_attrs, *strings, *loc_type, *scopes;
    long tag;
    /* call sites (NULL call_site_type: not made here) */
    PyObject *call_site_type, *unknown_type;
    long call_site_tag;
    /* subprograms scoping a location (NULL subprogram_type: not made here) */
    PyObject *subprogram_type, *file_type, *unit_type;
    long subprogram_tag;
    int with_flags;
    unsigned long long known_flags;
} Entries;

/* [start, stop) of debug entry `index` (1-based) in the data: 1; 0 when there is no such entry
 * or its offsets are not a range inside the data; -1 on error. */
static int entry_span(Entries *e, Py_ssize_t index, Py_ssize_t *start, Py_ssize_t *stop) {
    if (!(0 < index && index <= e->n_offsets))
        return 0;
    PyObject *first = PySequence_GetItem(e->offsets, index - 1);
    PyObject *next = index < e->n_offsets ? PySequence_GetItem(e->offsets, index) : NULL;
    Py_ssize_t from = first ? PyLong_AsSsize_t(first) : -1;
    Py_ssize_t to = index < e->n_offsets ? (next ? PyLong_AsSsize_t(next) : -1) : e->size;
    Py_XDECREF(first);
    Py_XDECREF(next);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();  /* an offset past any data: not a plain entry */
        return 0;
    }
    if (!(0 <= from && from <= to && to <= e->size))
        return 0;
    *start = from;
    *stop = to;
    return 1;
}

static PyObject *s_file, *s_name, *s_linkage_name, *s_compile_unit, *s_scope_line, *s_flags;

/* The DISubprogram of plain entry `index` (a new reference, kept in debug_attrs), as the careful
 * reader decodes it: the tag, then file, line, name, linkage name, compile unit, scope line (and
 * from 13.5 flags) filling the entry exactly, its file and compile unit decoded already, its
 * names read already, no unknown flag. NULL without an error: not one (the careful path's). */
static PyObject *plain_subprogram(Entries *e, uint64_t index) {
    Py_ssize_t from, to;
    if (e->subprogram_type == NULL || index > (uint64_t)e->n_offsets
            || entry_span(e, (Py_ssize_t)index, &from, &to) <= 0)
        return NULL;
    if (to - from < 7 || e->bytes[from] != (unsigned char)e->subprogram_tag)
        return NULL;
    Cursor c = {e->bytes, to, from + 1, to, NULL};
    uint64_t fields[7] = {0};
    for (int i = 0; i < (e->with_flags ? 7 : 6); i++)
        if (read_varint_or(NULL, &c, &fields[i]) < 0)
            return NULL;
    if (c.pos != to || (fields[6] & ~(uint64_t)e->known_flags))
        return NULL;
    PyObject *parts[4] = {NULL, NULL, NULL, NULL};  /* file, name, linkage name, unit */
    PyObject *tables[4] = {e->debug_attrs, e->strings, e->strings, e->debug_attrs};
    uint64_t keys[4] = {fields[0], fields[2], fields[3], fields[4]};
    for (int i = 0; i < 4; i++) {
        PyObject *key = PyLong_FromUnsignedLongLong(keys[i]);
        parts[i] = key == NULL ? NULL : PyDict_GetItemWithError(tables[i], key);
        Py_XDECREF(key);
        if (parts[i] == NULL)
            return NULL;  /* not decoded yet (or an error, which the caller sees) */
    }
    if ((PyObject *)Py_TYPE(parts[0]) != e->file_type
            || (PyObject *)Py_TYPE(parts[3]) != e->unit_type
            || !PyUnicode_Check(parts[1]) || !PyUnicode_Check(parts[2]))
        return NULL;
    for (int i = 0; i < 4; i++)
        Py_INCREF(parts[i]);  /* held while the subprogram is made (it allocates) */
    PyObject *empty = PyTuple_New(0), *sub = NULL;
    if (empty != NULL) {
        PyTypeObject *type = (PyTypeObject *)e->subprogram_type;
        sub = type->tp_new(type, empty, NULL);
        Py_DECREF(empty);
    }
    PyObject *line = PyLong_FromUnsignedLongLong(fields[1]);
    PyObject *scope_line = PyLong_FromUnsignedLongLong(fields[5]);
    PyObject *flags = PyLong_FromUnsignedLongLong(fields[6]);
    PyObject *key = PyLong_FromUnsignedLongLong(index);
    if (sub != NULL && (line == NULL || scope_line == NULL || flags == NULL || key == NULL
                        || PyObject_GenericSetAttr(sub, s_file, parts[0]) < 0
                        || PyObject_GenericSetAttr(sub, s_line, line) < 0
                        || PyObject_GenericSetAttr(sub, s_name, parts[1]) < 0
                        || PyObject_GenericSetAttr(sub, s_linkage_name, parts[2]) < 0
                        || PyObject_GenericSetAttr(sub, s_compile_unit, parts[3]) < 0
                        || PyObject_GenericSetAttr(sub, s_scope_line, scope_line) < 0
                        || PyObject_GenericSetAttr(sub, s_flags, flags) < 0
                        || PyDict_SetItem(e->debug_attrs, key, sub) < 0))
        Py_CLEAR(sub);
    Py_XDECREF(line);
    Py_XDECREF(scope_line);
    Py_XDECREF(flags);
    Py_XDECREF(key);
    for (int i = 0; i < 4; i++)
        Py_DECREF(parts[i]);
    return sub;
}

/* The DILoc of plain entry `index` (a new reference), as the reader's _plain_loc makes it: its
 * scope (a type in `scopes`) and file name decoded already, or its scope a plain subprogram
 * (plain_subprogram). NULL without an error: not one. */
static PyObject *plain_entry_loc(Entries *e, Py_ssize_t index) {
    Py_ssize_t from, to;
    int spanned = entry_span(e, index, &from, &to);
    if (spanned <= 0)
        return NULL;
    uint64_t fields[4];
    if (!plain_loc_fields(e->bytes, from, to, (unsigned char)e->tag, fields))
        return NULL;
    PyObject *scope_key = PyLong_FromUnsignedLongLong(fields[0]);
    PyObject *name_key = PyLong_FromUnsignedLongLong(fields[1]);
    PyObject *scope = NULL, *name = NULL, *made = NULL;
    if (scope_key != NULL && name_key != NULL) {
        scope = PyDict_GetItemWithError(e->debug_attrs, scope_key);
        if (scope == NULL && !PyErr_Occurred())  /* an entry's location in its subprogram */
            scope = made = plain_subprogram(e, fields[0]);
        if (!PyErr_Occurred())
            name = PyDict_GetItemWithError(e->strings, name_key);
    }
    Py_XDECREF(scope_key);
    Py_XDECREF(name_key);
    Py_XDECREF(made);  /* debug_attrs holds it */
    if (PyErr_Occurred())
        return NULL;
    int scoped = 0;
    for (Py_ssize_t k = 0; scope != NULL && k < PyTuple_GET_SIZE(e->scopes); k++)
        scoped |= (PyObject *)Py_TYPE(scope) == PyTuple_GET_ITEM(e->scopes, k);
    if (!scoped || name == NULL)
        return NULL;
    Py_INCREF(scope);  /* held while the location is made (it allocates) */
    Py_INCREF(name);
    PyObject *loc = make_loc((PyTypeObject *)e->loc_type, scope, name, fields[2], fields[3]);
    Py_DECREF(scope);
    Py_DECREF(name);
    return loc;
}

/* A call site's callee or caller, debug index `index`, as the reader's _call_site_part reads it:
 * None for index 0 or an `unknown` entry, a decoded location, or a plain DILoc entry made here
 * (kept in debug_attrs, as debug_attr keeps it). A new reference; NULL without an error: anything
 * else, which the careful path reads. */
static PyObject *call_site_part(Entries *e, uint64_t index) {
    if (index == 0)
        return Py_NewRef(Py_None);
    if (index > (uint64_t)e->n_offsets)
        return NULL;
    PyObject *key = PyLong_FromUnsignedLongLong(index);
    if (key == NULL)
        return NULL;
    PyObject *part = PyDict_GetItemWithError(e->debug_attrs, key);
    if (part != NULL) {
        PyObject *type = (PyObject *)Py_TYPE(part);
        part = type == e->loc_type || type == e->call_site_type ? Py_NewRef(part)
               : type == e->unknown_type ? Py_NewRef(Py_None) : NULL;
    } else if (!PyErr_Occurred()) {
        part = plain_entry_loc(e, (Py_ssize_t)index);
        if (part != NULL && PyDict_SetItem(e->debug_attrs, key, part) < 0)
            Py_CLEAR(part);
    }
    Py_DECREF(key);
    return part;
}

static PyObject *s_callee, *s_caller;

/* The CallSiteLoc of entry `index` when it is a plain one: the tag, two varints filling the
 * entry exactly, parts call_site_part makes. A new reference; NULL without an error: not one. */
static PyObject *plain_call_site(Entries *e, Py_ssize_t index) {
    Py_ssize_t from, to;
    if (e->call_site_type == NULL || entry_span(e, index, &from, &to) <= 0)
        return NULL;
    if (to - from < 3 || e->bytes[from] != (unsigned char)e->call_site_tag)
        return NULL;
    Cursor c = {e->bytes, to, from + 1, to, NULL};
    uint64_t callee_index, caller_index;
    if (read_varint_or(NULL, &c, &callee_index) < 0 || read_varint_or(NULL, &c, &caller_index) < 0
            || c.pos != to)
        return NULL;
    PyObject *callee = call_site_part(e, callee_index);
    if (callee == NULL)
        return NULL;
    PyObject *caller = call_site_part(e, caller_index);
    if (caller == NULL) {
        Py_DECREF(callee);
        return NULL;
    }
    PyObject *site = NULL, *empty = PyTuple_New(0);
    if (empty != NULL) {
        PyTypeObject *type = (PyTypeObject *)e->call_site_type;
        site = type->tp_new(type, empty, NULL);
        Py_DECREF(empty);
    }
    if (site != NULL && (PyObject_GenericSetAttr(site, s_callee, callee) < 0
                         || PyObject_GenericSetAttr(site, s_caller, caller) < 0))
        Py_CLEAR(site);
    Py_DECREF(callee);
    Py_DECREF(caller);
    return site;
}

/* plain_locations(data, offsets, indices, start, stop, locations, debug_attrs, strings, loc_type,
 * scopes, tag[, call_site_type, unknown_type, call_site_tag]) -> list: the locations of debug
 * indices indices[start:stop], as the reader's location() gives them for an exactly sliced
 * table, up to the first entry that is neither in `locations` (its cache) nor plain: a DILoc
 * whose scope (a type in `scopes`) and file name are decoded already, or (with the last three
 * arguments) a call site not decoded yet whose callee and caller are unknown, decoded, or plain
 * DILocs. Those made here are kept in `locations` and `debug_attrs`. The reader's location()
 * reads that entry (decoding its scope, or saying what is wrong), then calls again after it. */
static PyObject *plain_locations(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11 && nargs != 14 && nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "plain_locations takes 11, 14 or 15 arguments");
        return NULL;
    }
    PyObject *data = args[0], *indices = args[2], *locations = args[5];
    Entries e = {NULL, 0, args[1], 0, args[6], args[7], args[8], args[9], 0, NULL, NULL, 0,
                 NULL, NULL, NULL, 0, 0, 0};
    if (nargs == 15) {  /* (subprogram type, file type, unit type, tag, with flags, known flags) */
        PyObject *sub = args[14];
        if (!PyTuple_Check(sub) || PyTuple_GET_SIZE(sub) != 6
                || !PyType_Check(PyTuple_GET_ITEM(sub, 0))
                || ((PyTypeObject *)PyTuple_GET_ITEM(sub, 0))->tp_new == NULL
                || !PyType_Check(PyTuple_GET_ITEM(sub, 1))
                || !PyType_Check(PyTuple_GET_ITEM(sub, 2))) {
            PyErr_SetString(PyExc_TypeError, "plain_locations: bad subprogram kinds");
            return NULL;
        }
        e.subprogram_type = PyTuple_GET_ITEM(sub, 0);
        e.file_type = PyTuple_GET_ITEM(sub, 1);
        e.unit_type = PyTuple_GET_ITEM(sub, 2);
        e.subprogram_tag = PyLong_AsLong(PyTuple_GET_ITEM(sub, 3));
        e.with_flags = PyObject_IsTrue(PyTuple_GET_ITEM(sub, 4));
        e.known_flags = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(sub, 5));
        if (!PyErr_Occurred() && (e.subprogram_tag < 0 || e.subprogram_tag > 127
                                  || e.with_flags < 0)) {
            PyErr_SetString(PyExc_ValueError, "plain_locations: bad subprogram tag");
            return NULL;
        }
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]), stop = PyLong_AsSsize_t(args[4]);
    e.tag = PyLong_AsLong(args[10]);
    if (nargs >= 14) {
        e.call_site_type = args[11];
        e.unknown_type = args[12];
        e.call_site_tag = PyLong_AsLong(args[13]);
    }
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_Check(locations) || !PyDict_Check(e.debug_attrs) || !PyDict_Check(e.strings)
            || !PyType_Check(e.loc_type) || ((PyTypeObject *)e.loc_type)->tp_new == NULL
            || !PyTuple_Check(e.scopes) || e.tag < 0 || e.tag > 127
            || (nargs >= 14 && (!PyType_Check(e.call_site_type)
                                || ((PyTypeObject *)e.call_site_type)->tp_new == NULL
                                || !PyType_Check(e.unknown_type)
                                || e.call_site_tag < 0 || e.call_site_tag > 127))) {
        PyErr_SetString(PyExc_TypeError, "plain_locations: bad argument types");
        return NULL;
    }
    if (start < 0 || stop < start) {
        PyErr_SetString(PyExc_ValueError, "plain_locations: start and stop are not a range");
        return NULL;
    }
    e.n_offsets = PyObject_Length(e.offsets);
    if (e.n_offsets < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    e.bytes = view.buf;
    e.size = view.len;
    PyObject *found = PyList_New(0);
    if (found == NULL)
        goto fail;
    for (Py_ssize_t i = start; i < stop; i++) {
        PyObject *key = PySequence_GetItem(indices, i), *value = NULL;
        if (key == NULL)
            goto fail;
        value = PyDict_GetItemWithError(locations, key);
        if (value != NULL) {
            Py_INCREF(value);
        } else if (!PyErr_Occurred()) {
            Py_ssize_t index = PyLong_AsSsize_t(key);
            if (index == -1 && PyErr_Occurred()) {
                PyErr_Clear();  /* not an index the table has: the careful path says so */
                index = 0;
            }
            value = plain_entry_loc(&e, index);
            if (value == NULL && !PyErr_Occurred()) {
                /* a call site decoded already (a part of another) is the careful path's */
                int cached = PyDict_Contains(e.debug_attrs, key);
                if (cached == 0)
                    value = plain_call_site(&e, index);
            }
            if (value != NULL && (PyDict_SetItem(locations, key, value) < 0
                                  || PyDict_SetItem(e.debug_attrs, key, value) < 0))
                Py_CLEAR(value);
        }
        Py_DECREF(key);
        if (value == NULL) {
            if (PyErr_Occurred())
                goto fail;
            break;
        }
        int failed = PyList_Append(found, value) < 0;
        Py_DECREF(value);
        if (failed)
            goto fail;
    }
    PyBuffer_Release(&view);
    return found;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(found);
    return NULL;
}

/* store_locations(ops, locations, loc_slot, op_class): for each op and its location, the
 * location stored through `loc_slot` (Op's member descriptor for `loc`) and the op's class made
 * `op_class` (PendingLocations.materialise's loop; the ops are DecodedOps, whose `loc` property
 * would decode the function's locations again). */
static PyObject *store_locations(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_Check(args[0]) || !PyList_Check(args[1])
            || Py_TYPE(args[2])->tp_descr_set == NULL || !PyType_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "store_locations(ops, locations, loc_slot, op_class)");
        return NULL;
    }
    PyObject *ops = args[0], *locations = args[1], *slot = args[2], *op_class = args[3];
    descrsetfunc set = Py_TYPE(slot)->tp_descr_set;
    Py_ssize_t count = PyList_GET_SIZE(ops) < PyList_GET_SIZE(locations)
                       ? PyList_GET_SIZE(ops) : PyList_GET_SIZE(locations);
    /* A class Python let an op of it leave for op_class, itself without instance dicts: its
     * other ops switch as Python's __class__ assignment switches them, without its checks. */
    PyTypeObject *switched = NULL, *target = (PyTypeObject *)op_class;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the lists are the caller's own: no Python code runs here to change them */
        PyObject *op = PyList_GET_ITEM(ops, i), *loc = PyList_GET_ITEM(locations, i);
        if (set(slot, op, loc) < 0)
            return NULL;
        PyTypeObject *from = Py_TYPE(op);
        if (from == target)
            continue;
        if (from == switched) {
            Py_INCREF(target);
            Py_SET_TYPE(op, target);
            Py_DECREF(from);
            continue;
        }
        if (PyObject_SetAttr(op, s_class, op_class) < 0)
            return NULL;
        if (from->tp_dictoffset == 0 && target->tp_dictoffset == 0
                && PyType_HasFeature(from, Py_TPFLAGS_HEAPTYPE)
                && PyType_HasFeature(target, Py_TPFLAGS_HEAPTYPE)
                && from->tp_basicsize == target->tp_basicsize)
            switched = from;
    }
    Py_RETURN_NONE;
}

/* new_values(types, owner, value_class, type_slot, owner_slot, index_slot) -> list: for each
 * type a value_class object as Value(type, owner, index) makes it (owner held by a weak
 * reference), its fields stored through the slots given: a block's arguments. */
static PyObject *new_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[0]) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "new_values(types, owner, value_class, type_slot, "
                                         "owner_slot, index_slot)");
        return NULL;
    }
    PyObject *types = args[0];
    PyTypeObject *value_class = (PyTypeObject *)args[2];
    descrsetfunc sets[3];
    for (int i = 0; i < 3; i++) {
        sets[i] = Py_TYPE(args[3 + i])->tp_descr_set;
        if (sets[i] == NULL) {
            PyErr_SetString(PyExc_TypeError, "new_values: the slots must be settable");
            return NULL;
        }
    }
    Py_ssize_t count = PyTuple_GET_SIZE(types);
    PyObject *values = PyList_New(count);
    PyObject *owner_ref = values == NULL || count == 0 ? NULL : PyWeakref_NewRef(args[1], NULL);
    if (values == NULL || (count && owner_ref == NULL))
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = value_class->tp_alloc(value_class, 0);
        if (value == NULL)
            goto fail;
        PyList_SET_ITEM(values, i, value);
        PyObject *index = PyLong_FromSsize_t(i);
        int failed = index == NULL || sets[0](args[3], value, PyTuple_GET_ITEM(types, i)) < 0
                     || sets[1](args[4], value, owner_ref) < 0 || sets[2](args[5], value, index) < 0;
        Py_XDECREF(index);
        if (failed)
            goto fail;
    }
    Py_XDECREF(owner_ref);
    return values;
fail:
    Py_XDECREF(owner_ref);
    Py_XDECREF(values);
    return NULL;
}

static PyMethodDef decoder_functions[] = {
    {"new_values", (PyCFunction)(void (*)(void))new_values, METH_FASTCALL,
     "new_values(types, owner, value_class, type_slot, owner_slot, index_slot) -> list of "
     "Value(type, owner, index)"},
    {"decode_ops", (PyCFunction)(void (*)(void))decode_ops, METH_FASTCALL,
     "decode_ops(mr, reader, data, pos, end, values, preorder, pending, depth, base, decoders, "
     "count) -> (ops, pos)"},
    {"plain_locations", (PyCFunction)(void (*)(void))plain_locations, METH_FASTCALL,
     "plain_locations(data, offsets, indices, start, stop, locations, debug_attrs, strings, "
     "loc_type, scopes, tag[, call_site_type, unknown_type, call_site_tag[, subprograms]]) "
     "-> list"},
    {"store_locations", (PyCFunction)(void (*)(void))store_locations, METH_FASTCALL,
     "store_locations(ops, locations, loc_slot, op_class): each op's location stored, its "
     "class made op_class"},
    {NULL, NULL, 0, NULL},
};

static int item_int(PyObject *tuple, Py_ssize_t index, long *out) {
    *out = PyLong_AsLong(PyTuple_GET_ITEM(tuple, index));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* OpDecoder(program): program = (spec, counted, variadic_results, n_results, synthesized,
 * has_flags, known_flags, attr_steps, pending, mode, num_fixed, operand_steps, n_regions,
 * helpers); attr step (name, action, bit, kind, width, extra); operand step (name, arity, bit);
 * helpers (DecodedOp, Value, Bail, then the descriptors in D_* order). */
static PyObject *decoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *program;
    if (!PyArg_ParseTuple(args, "O!:OpDecoder", &PyTuple_Type, &program))
        return NULL;
    if (PyTuple_GET_SIZE(program) != 14) {
        PyErr_SetString(PyExc_ValueError, "an OpDecoder program has 14 fields");
        return NULL;
    }
    OpDecoder *self = (OpDecoder *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)decode;
    Py_INCREF(program);
    self->program = program;
    long number;
    PyObject *steps, *helpers;
    self->spec = PyTuple_GET_ITEM(program, 0);
    if (item_int(program, 1, &number) < 0) goto fail;
    self->counted = number != 0;
    if (item_int(program, 2, &number) < 0) goto fail;
    self->variadic_results = number != 0;
    if (item_int(program, 3, &number) < 0) goto fail;
    self->n_results = number;
    self->synthesized = PyTuple_GET_ITEM(program, 4);
    if (item_int(program, 5, &number) < 0) goto fail;
    self->has_flags = number != 0;
    self->known_flags = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(program, 6));
    if (PyErr_Occurred()) goto fail;
    steps = PyTuple_GET_ITEM(program, 7);
    self->pending = PyTuple_GET_ITEM(program, 8);
    if (item_int(program, 9, &number) < 0) goto fail;
    if (number < M_FIXED || number > M_FLAT) {
        PyErr_SetString(PyExc_ValueError, "malformed OpDecoder program: operand mode");
        goto fail;
    }
    self->mode = (int)number;
    if (item_int(program, 10, &number) < 0) goto fail;
    self->num_fixed = number;
    if (item_int(program, 12, &number) < 0) goto fail;
    self->n_regions = number;
    helpers = PyTuple_GET_ITEM(program, 13);
    if (!PyTuple_Check(self->synthesized) || !PyTuple_Check(steps) || !PyTuple_Check(self->pending)
            || !PyTuple_Check(PyTuple_GET_ITEM(program, 11)) || !PyTuple_Check(helpers)
            || PyTuple_GET_SIZE(helpers) != 3 + D_COUNT
            || !PyType_Check(PyTuple_GET_ITEM(helpers, 0))
            || !PyType_Check(PyTuple_GET_ITEM(helpers, 1))) {
        PyErr_SetString(PyExc_ValueError, "malformed OpDecoder program");
        goto fail;
    }
    self->op_type = (PyTypeObject *)PyTuple_GET_ITEM(helpers, 0);
    self->value_type = (PyTypeObject *)PyTuple_GET_ITEM(helpers, 1);
    self->bail = PyTuple_GET_ITEM(helpers, 2);
    for (int i = 0; i < D_COUNT; i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(helpers, 3 + i);
        if (Py_TYPE(descriptor)->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_ValueError, "an OpDecoder slot is not a settable descriptor");
            goto fail;
        }
        self->descriptors[i] = descriptor;
        /* a plain object slot of the class the decoder makes (Op's for an op, Value's) */
        PyTypeObject *made = i < D_VALUE_TYPE ? self->op_type : self->value_type;
        self->offsets[i] = tilebc_member_offset(descriptor, made, 1);
    }
    self->n_attrs = PyTuple_GET_SIZE(steps);
    self->attrs = PyMem_Calloc(self->n_attrs ? self->n_attrs : 1, sizeof(AttrStep));
    if (self->attrs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->n_attrs; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        long action, bit, kind, width;
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 6 || item_int(step, 1, &action) < 0
                || item_int(step, 2, &bit) < 0 || item_int(step, 3, &kind) < 0
                || item_int(step, 4, &width) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "malformed OpDecoder attribute step");
            goto fail;
        }
        AttrStep *out = &self->attrs[i];
        out->name = PyTuple_GET_ITEM(step, 0);
        out->action = (int)action;
        out->bit = (int)bit;
        out->kind = (int)kind;
        out->width = (int)width;
        out->extra = PyTuple_GET_ITEM(step, 5);
        if (kind == K_TAGGED) {  /* (f, div_by tag, bounded tag): tilebc/binary/tags.py's */
            long div_by, bounded;
            if (!PyTuple_Check(out->extra) || PyTuple_GET_SIZE(out->extra) != 3
                    || item_int(out->extra, 1, &div_by) < 0
                    || item_int(out->extra, 2, &bounded) < 0 || div_by < 0 || div_by > 255
                    || bounded < 0 || bounded > 255) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "malformed OpDecoder attribute step");
                goto fail;
            }
            out->div_by = (int)div_by;
            out->bounded = (int)bounded;
            out->extra = PyTuple_GET_ITEM(out->extra, 0);
        }
        if ((kind == K_ENUM && !PyDict_Check(out->extra)) || width < 1 || width > 64
                || bit < -1 || bit > 63 || action < A_READ || action > A_ABSENT
                || (bit < 0 && (action == A_UNIT || action == A_OPTIONAL))
                || kind < K_ENUM || kind > K_BOOL_ARRAY) {
            PyErr_SetString(PyExc_ValueError, "malformed OpDecoder attribute step");
            goto fail;
        }
    }
    steps = PyTuple_GET_ITEM(program, 11);
    self->n_operands = PyTuple_GET_SIZE(steps);
    self->operands = PyMem_Calloc(self->n_operands ? self->n_operands : 1, sizeof(OperandStep));
    if (self->operands == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->n_operands; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        long arity, bit;
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 3 || item_int(step, 1, &arity) < 0
                || item_int(step, 2, &bit) < 0 || bit < -1 || bit > 63 || arity < R_ONE
                || arity > R_VARIADIC) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "malformed OpDecoder operand step");
            goto fail;
        }
        self->operands[i].name = PyTuple_GET_ITEM(step, 0);
        self->operands[i].arity = (int)arity;
        self->operands[i].bit = (int)bit;
    }
    /* compact fields where the op class reads them (its operands and attrs are FieldsSlots) */
    PyObject *over_operands = _PyType_Lookup(self->op_type, s_operands);
    PyObject *over_attrs = _PyType_Lookup(self->op_type, s_attrs);
    if (tilebc_is_fields_slot(over_operands) && tilebc_is_fields_slot(over_attrs)) {
        Py_ssize_t n_pending = PyTuple_GET_SIZE(self->pending);
        PyObject *operand_names = PyTuple_New(self->n_operands);
        PyObject *attr_names = PyTuple_New(self->n_attrs + n_pending);
        PyObject *none = PyTuple_New(0);
        self->no_fields = PyTuple_New(1);
        int made = operand_names != NULL && attr_names != NULL && none != NULL
                   && self->no_fields != NULL;
        for (Py_ssize_t i = 0; made && i < self->n_operands; i++)
            PyTuple_SET_ITEM(operand_names, i, Py_NewRef(self->operands[i].name));
        for (Py_ssize_t i = 0; made && i < self->n_attrs; i++)
            PyTuple_SET_ITEM(attr_names, i, Py_NewRef(self->attrs[i].name));
        for (Py_ssize_t i = 0; made && i < n_pending; i++) {
            PyObject *name = PyObject_GetAttr(PyTuple_GET_ITEM(self->pending, i), s_name);
            if (name != NULL && !PyUnicode_CheckExact(name)) {
                Py_CLEAR(name);
                PyErr_SetString(PyExc_ValueError, "malformed OpDecoder program: a default's name");
            }
            if (name == NULL) {
                made = 0;
                break;
            }
            PyUnicode_InternInPlace(&name);
            PyTuple_SET_ITEM(attr_names, self->n_attrs + i, name);
        }
        if (made) {  /* the names as FieldNames: what tells compact fields from other tuples */
            self->operand_names = tilebc_field_names(operand_names);
            self->attr_names = tilebc_field_names(attr_names);
            PyObject *no_names = tilebc_field_names(none);
            if (no_names != NULL)
                PyTuple_SET_ITEM(self->no_fields, 0, no_names);
            made = self->operand_names != NULL && self->attr_names != NULL && no_names != NULL;
        }
        Py_XDECREF(operand_names);
        Py_XDECREF(attr_names);
        Py_XDECREF(none);
        if (!made)
            goto fail;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void decoder_dealloc(OpDecoder *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->program);
    Py_CLEAR(self->operand_names);
    Py_CLEAR(self->attr_names);
    Py_CLEAR(self->no_fields);
    PyMem_Free(self->attrs);
    PyMem_Free(self->operands);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int decoder_traverse(OpDecoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->program);
    Py_VISIT(self->operand_names);
    Py_VISIT(self->attr_names);
    Py_VISIT(self->no_fields);
    return 0;
}

static PyTypeObject OpDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilebc._speedups.OpDecoder",
    .tp_basicsize = sizeof(OpDecoder),
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_vectorcall_offset = offsetof(OpDecoder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "One op kind's fast decoder (tilebc/binary/fastpath.py makes it from the op's plan)",
    .tp_traverse = (traverseproc)decoder_traverse,
    .tp_new = decoder_new,
    .tp_free = PyObject_GC_Del,
};

int add_op_decoder(PyObject *module) {
    s_types = PyUnicode_InternFromString("_types");
    s_string_cache = PyUnicode_InternFromString("_string_cache");
    s_default_for = PyUnicode_InternFromString("default_for");
    s_dense = PyUnicode_InternFromString("_dense");
    s_scope = PyUnicode_InternFromString("scope");
    s_filename = PyUnicode_InternFromString("filename");
    s_line = PyUnicode_InternFromString("line");
    s_column = PyUnicode_InternFromString("column");
    s_attr_cache = PyUnicode_InternFromString("_attr_cache");
    s_callee = PyUnicode_InternFromString("callee");
    s_caller = PyUnicode_InternFromString("caller");
    s_file = PyUnicode_InternFromString("file");
    s_name = PyUnicode_InternFromString("name");
    s_linkage_name = PyUnicode_InternFromString("linkage_name");
    s_compile_unit = PyUnicode_InternFromString("compile_unit");
    s_scope_line = PyUnicode_InternFromString("scope_line");
    s_flags = PyUnicode_InternFromString("flags");
    s_class = PyUnicode_InternFromString("__class__");
    s_operands = PyUnicode_InternFromString("operands");
    s_attrs = PyUnicode_InternFromString("attrs");
    if (!s_operands || !s_attrs)
        return -1;
    if (!s_file || !s_name || !s_linkage_name || !s_compile_unit || !s_scope_line || !s_flags
            || !s_class)
        return -1;
    if (!s_attr_cache || !s_callee || !s_caller || !s_types || !s_string_cache || !s_default_for || !s_dense || !s_scope || !s_filename
            || !s_line || !s_column || PyType_Ready(&OpDecoderType) < 0)
        return -1;
    Py_INCREF(&OpDecoderType);
    if (PyModule_AddObject(module, "OpDecoder", (PyObject *)&OpDecoderType) < 0) {
        Py_DECREF(&OpDecoderType);
        return -1;
    }
    /* plain_locations takes a fifteenth argument and makes the subprograms scoping locations */
    if (PyModule_AddIntConstant(module, "PLAIN_SUBPROGRAMS", 1) < 0)
        return -1;
    /* the attribute kinds an OpDecoder program may name (K_ENUM..K_BOOL_ARRAY) */
    if (PyModule_AddIntConstant(module, "DECODER_KINDS", K_BOOL_ARRAY + 1) < 0)
        return -1;
    return PyModule_AddFunctions(module, decoder_functions);
}
