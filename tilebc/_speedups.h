/* What the parts of tilebc._speedups share: the lexer's token and cursor (tilebc/_speedups.c),
 * which the op parser (tilebc/_opparser.c) reads and advances. */
#ifndef TILEBC_SPEEDUPS_H
#define TILEBC_SPEEDUPS_H

#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *kind;
    PyObject *text;
    Py_ssize_t pos;
} TokenObject;

typedef struct {
    PyObject_HEAD
    PyObject *text;    /* str */
    Py_ssize_t pos;    /* where scanning resumes */
    Py_ssize_t end;    /* where the last token read ends */
    PyObject *peeked;  /* the Token peek() read last, or NULL */
} CursorObject;

/* Where the spaces and // comments of `data` (a str's kind and data, `n` long) from `pos` end
 * (ASCII whitespace only, as the scanner skips them). */
Py_ssize_t tilebc_skip_spaces(int kind, const void *data, Py_ssize_t n, Py_ssize_t pos);
/* The scanner of scan_token: 1 with the token's kind (borrowed; an interned str) and its
 * [start, stop) when it reads one from `pos` (spaces and comments skipped), 0 when it declines
 * (the lexer's Python reads those tokens). `text` must be a ready str. */
int tilebc_scan(PyObject *text, Py_ssize_t pos, PyObject **kind, Py_ssize_t *start,
                Py_ssize_t *stop);
/* After a call that may have raised, where the caller can hand its work to the Python path:
 * 1 when there is no exception, or an ordinary one (an Exception other than MemoryError), which
 * is cleared; 0 when one must propagate (KeyboardInterrupt, SystemExit, MemoryError), left set. */
int tilebc_recoverable(void);
/* A new Token. */
PyObject *tilebc_token_make(PyObject *kind, PyObject *text, Py_ssize_t pos);
/* The next token (a new reference; NULL with an exception), as Cursor.peek() reads it. */
PyObject *tilebc_cursor_peek(CursorObject *cursor);
/* Consumes `token`, the one tilebc_cursor_peek returned last. */
void tilebc_cursor_advance(CursorObject *cursor, PyObject *token);
/* Whether `object` is a CursorBase (a cursor on the compiled token methods). */
int tilebc_is_cursor(PyObject *object);

/* dict[id(object)] (borrowed), as the Python side keys its caches by id(); NULL when it holds
 * none (no exception) or on an error (exception set). */
static inline PyObject *tilebc_by_id(PyObject *dict, PyObject *object) {
    PyObject *key = PyLong_FromVoidPtr(object);
    if (key == NULL)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(dict, key);
    Py_DECREF(key);
    return found;
}

/* The value of the (object, value) pair dict[id(object)] keeps for this very object (borrowed;
 * the object rides along so that an id reused by another object is no hit); NULL when there is
 * none (no exception) or on an error (exception set). */
static inline PyObject *tilebc_pair_by_id(PyObject *dict, PyObject *object) {
    PyObject *pair = tilebc_by_id(dict, object);
    if (pair != NULL && PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2
            && PyTuple_GET_ITEM(pair, 0) == object)
        return PyTuple_GET_ITEM(pair, 1);
    return NULL;
}

/* Reading an attribute kept in a __slots__ slot without the generic lookup: the slot's offset is
 * found once per type (the member descriptor its MRO gives for the name, with the generic
 * __getattribute__) and read directly while the type is unchanged (its version tag). Anything
 * else (a property, a type's own __getattribute__, an unset slot) goes to PyObject_GetAttr, but
 * for a raw cache's FieldsSlot, whose slot is read. The IR's ops, values and scopes are read
 * this way millions of times in a large module. */
/* Types one cache keeps: the op classes (Op, ParsedOp, LocatedOp, DecodedOp) and room for two
 * more; a type beyond them is read through PyObject_GetAttr, correct but slow. */
#define TILEBC_SLOT_TYPES 6
typedef struct {
    struct {
        PyTypeObject *type;
        unsigned int version;
        Py_ssize_t offset;
    } entries[TILEBC_SLOT_TYPES];
    int used;
    /* 1: the slot itself where a FieldsSlot covers it (DecodedOp's and LocatedOp's operands and
     * attrs, which may hold the decoder's compact fields; any other property still goes to
     * PyObject_GetAttr): a cache made with TILEBC_RAW_SLOT */
    int raw;
} TilebcSlotCache;
#define TILEBC_RAW_SLOT {.raw = 1}

/* Where the object slot `descriptor` (a member descriptor: T_OBJECT_EX, writable when
 * `written`) lies in instances of `type`, or -1 where it is no such slot of that type. */
Py_ssize_t tilebc_member_offset(PyObject *descriptor, PyTypeObject *type, int written);

/* What tilebc_slot does on a miss: records the type (its slot's offset, or -1 where the name is
 * no slot of it), then PyObject_GetAttr (a raw cache: the slot's value where it has one). */
PyObject *tilebc_slot_miss(PyObject *object, PyObject *name, TilebcSlotCache *cache);

/* Whether the type's version tag stands for its attributes as they are (a changed type gets a
 * new one): the flag before 3.12. From 3.12 a type's tag is assigned lazily and the flag is no
 * longer set wherever a tag is (3.13 found it unset on our op classes: every read fell back to
 * getattr), while a changed type always has its tag zeroed: a tag of 0 means none. */
static inline int tilebc_version_valid(PyTypeObject *type) {
#if PY_VERSION_HEX >= 0x030C0000
    return type->tp_version_tag != 0;
#else
    return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG);
#endif
}

/* getattr(object, name), a new reference (NULL with an exception) */
static inline PyObject *tilebc_slot(PyObject *object, PyObject *name, TilebcSlotCache *cache) {
    PyTypeObject *type = Py_TYPE(object);
    for (int i = 0; i < cache->used; i++) {
        if (cache->entries[i].type == type) {
            if (cache->entries[i].version != type->tp_version_tag
                    || !tilebc_version_valid(type))
                break;
            if (cache->entries[i].offset < 0)  /* not a slot of this type */
                return PyObject_GetAttr(object, name);
            PyObject *value = *(PyObject **)((char *)object + cache->entries[i].offset);
            if (value == NULL)
                break;
            return Py_NewRef(value);
        }
    }
    return tilebc_slot_miss(object, name, cache);
}

/* The names of compact fields: a tuple of this type (tilebc_field_names makes one from a tuple
 * of strs), so that no other tuple reads as compact fields. */
extern PyTypeObject TilebcFieldNamesType;
PyObject *tilebc_field_names(PyObject *names);

/* An op's operands or attrs as the decoder may leave them: a dict, or its compact fields, a tuple
 * (names, value, ...) that DecodedOp turns into the dict on first use from Python (a large module
 * has ~75k ops, and two dicts each took more memory and time than the rest of the op). */
static inline int tilebc_compact_fields(PyObject *fields) {
    return PyTuple_CheckExact(fields) && PyTuple_GET_SIZE(fields) >= 1
           && Py_IS_TYPE(PyTuple_GET_ITEM(fields, 0), &TilebcFieldNamesType)
           && PyTuple_GET_SIZE(PyTuple_GET_ITEM(fields, 0)) == PyTuple_GET_SIZE(fields) - 1;
}

/* The dict of compact fields (a new reference). */
PyObject *tilebc_fields_dict(PyObject *compact);
/* Whether `descriptor` is a FieldsSlot (a class whose ops may hold compact fields). */
int tilebc_is_fields_slot(PyObject *descriptor);

/* Whether `fields` is a dict or compact fields (what the functions below read). */
static inline int tilebc_is_fields(PyObject *fields) {
    return PyDict_CheckExact(fields) || tilebc_compact_fields(fields);
}

static inline Py_ssize_t tilebc_fields_size(PyObject *fields) {
    return PyDict_CheckExact(fields) ? PyDict_GET_SIZE(fields) : PyTuple_GET_SIZE(fields) - 1;
}

/* PyDict_Next over a dict or compact fields (tilebc_is_fields), in the dict's order. */
static inline int tilebc_fields_next(PyObject *fields, Py_ssize_t *pos, PyObject **name,
                                     PyObject **value) {
    if (PyDict_CheckExact(fields))
        return PyDict_Next(fields, pos, name, value);
    if (*pos >= PyTuple_GET_SIZE(fields) - 1)
        return 0;
    *name = PyTuple_GET_ITEM(PyTuple_GET_ITEM(fields, 0), *pos);
    *value = PyTuple_GET_ITEM(fields, *pos + 1);
    (*pos)++;
    return 1;
}

/* fields[name], borrowed; NULL when absent (no exception) or on an error (exception set). Names
 * are the op table's interned strs: compared by identity first. */
static inline PyObject *tilebc_fields_get(PyObject *fields, PyObject *name) {
    if (PyDict_CheckExact(fields))
        return PyDict_GetItemWithError(fields, name);
    PyObject *names = PyTuple_GET_ITEM(fields, 0);
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < count; i++)
        if (PyTuple_GET_ITEM(names, i) == name)
            return PyTuple_GET_ITEM(fields, i + 1);
    for (Py_ssize_t i = 0; i < count; i++) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(names, i), name, Py_EQ);
        if (same < 0)
            return NULL;
        if (same)
            return PyTuple_GET_ITEM(fields, i + 1);
    }
    return NULL;
}

#endif
