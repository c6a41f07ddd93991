/* Optional compiled helpers for the hottest loops (tilebc/speedups.py loads them): the text
 * tools' lexer here, the bytecode reader's per-op decoder in _opdecoder.c.
 *
 * scan_token(text, pos): the lexer's common case in one call. Skips spaces and // comments from
 * `pos`, then reads one token of the kinds the lexer does not check further (value, hash, bang,
 * ident, punct) and returns (kind, text, start). It returns None for everything else: a string,
 * symbol or number token, the end of the input, a character no token starts with, any non-ASCII
 * character among the spaces or where a token starts. The Python lexer then reads the token its
 * own way (its regular expressions stay the one definition of the grammar; this must agree with
 * them whenever it returns a token).
 *
 * Token and CursorBase: the lexer's token and the token-level methods of its Cursor (peek, next,
 * at, accept, expect, expect_kind), which the parser calls about ten times per op. They use
 * scan_token's scanner and call back into the Python subclass for everything else: the tokens it
 * declines (`_peek_checked`) and the errors (`_expect_failed`, `_expect_kind_failed`), so the
 * grammar's rare cases and every message keep one definition, in tilebc/text/lexer.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include "_speedups.h"

static PyObject *kind_value, *kind_hash, *kind_bang, *kind_ident, *kind_punct;

static int is_name_start(Py_UCS4 ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
}

/* [A-Za-z0-9_$.] : ident, hash and bang tails */
static int is_word(Py_UCS4 ch) {
    return is_name_start(ch) || (ch >= '0' && ch <= '9') || ch == '$' || ch == '.';
}

/* [A-Za-z0-9_$.\-] : value names */
static int is_value_char(Py_UCS4 ch) {
    return is_word(ch) || ch == '-';
}

static int is_digit(Py_UCS4 ch) {
    return ch >= '0' && ch <= '9';
}

Py_ssize_t tilebc_skip_spaces(int kind, const void *data, Py_ssize_t n, Py_ssize_t pos) {
    /* ASCII whitespace only: others go to the regular expressions */
    while (pos < n) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, pos);
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
            pos++;
        } else if (ch == '/' && pos + 1 < n && PyUnicode_READ(kind, data, pos + 1) == '/') {
            pos += 2;
            while (pos < n && PyUnicode_READ(kind, data, pos) != '\n')
                pos++;
        } else {
            break;
        }
    }
    return pos;
}

/* The scanner: 1 with the token's kind (borrowed) and its [start, stop) when it reads one,
 * 0 when it declines (see scan_token). `text` must be a ready str. */
static int scan(PyObject *text, Py_ssize_t pos, PyObject **token_kind, Py_ssize_t *start_out,
                Py_ssize_t *stop_out) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (pos < 0)
        pos = 0; /* as re's match(text, pos) reads a negative pos */
    pos = tilebc_skip_spaces(kind, data, n, pos);
    if (pos >= n)
        return 0;
    Py_ssize_t start = pos;
    Py_UCS4 ch = PyUnicode_READ(kind, data, pos);
    Py_UCS4 next = pos + 1 < n ? PyUnicode_READ(kind, data, pos + 1) : 0;
    if (ch == '%') {
        if (!is_value_char(next))
            return 0;
        pos += 2;
        while (pos < n && is_value_char(PyUnicode_READ(kind, data, pos)))
            pos++;
        if (pos + 1 < n && PyUnicode_READ(kind, data, pos) == '#'
                && is_digit(PyUnicode_READ(kind, data, pos + 1))) {
            pos += 2;
            while (pos < n && is_digit(PyUnicode_READ(kind, data, pos)))
                pos++;
        }
        *token_kind = kind_value;
    } else if (ch == '#' || ch == '!') {
        if (!is_name_start(next))
            return 0;
        pos += 2;
        while (pos < n && is_word(PyUnicode_READ(kind, data, pos)))
            pos++;
        *token_kind = ch == '#' ? kind_hash : kind_bang;
    } else if (is_name_start(ch)) {
        pos++;
        while (pos < n && is_word(PyUnicode_READ(kind, data, pos)))
            pos++;
        *token_kind = kind_ident;
    } else if (ch == '-') {
        if (is_digit(next))
            return 0; /* a negative number */
        pos += next == '>' ? 2 : 1;
        *token_kind = kind_punct;
    } else if (ch < 128 && ch != 0 && strchr("()[]{}<>,:=?^*+", (int)ch) != NULL) {
        pos++;
        *token_kind = kind_punct;
    } else {
        return 0;
    }
    *start_out = start;
    *stop_out = pos;
    return 1;
}

static int ready(PyObject *text) {
#if PY_VERSION_HEX < 0x030C0000 /* strings are always ready from 3.12 on */
    return PyUnicode_READY(text);
#else
    (void)text;
    return 0;
#endif
}

static PyObject *scan_token(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "scan_token(text: str, pos: int)");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    if (ready(text) < 0)
        return NULL;
    PyObject *token_kind;
    Py_ssize_t start, stop;
    if (!scan(text, pos, &token_kind, &start, &stop))
        Py_RETURN_NONE;
    PyObject *token_text = PyUnicode_Substring(text, start, stop);
    if (token_text == NULL)
        return NULL;
    PyObject *where = PyLong_FromSsize_t(start);
    if (where == NULL) {
        Py_DECREF(token_text);
        return NULL;
    }
    Py_INCREF(token_kind);
    PyObject *result = PyTuple_New(3);
    if (result == NULL) {
        Py_DECREF(token_kind);
        Py_DECREF(token_text);
        Py_DECREF(where);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, token_kind);
    PyTuple_SET_ITEM(result, 1, token_text);
    PyTuple_SET_ITEM(result, 2, where);
    return result;
}

/* ---- Token -------------------------------------------------------------------------------- */

static PyTypeObject TokenType;

static PyObject *token_make(PyObject *kind, PyObject *text, Py_ssize_t pos) {
    TokenObject *token = PyObject_New(TokenObject, &TokenType);
    if (token == NULL)
        return NULL;
    Py_INCREF(kind);
    Py_INCREF(text);
    token->kind = kind;
    token->text = text;
    token->pos = pos;
    return (PyObject *)token;
}

static PyObject *token_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"kind", "text", "pos", NULL};
    PyObject *kind, *text;
    Py_ssize_t pos;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UUn:Token", names, &kind, &text, &pos))
        return NULL;
    return token_make(kind, text, pos);
}

static void token_dealloc(TokenObject *token) {
    Py_XDECREF(token->kind);
    Py_XDECREF(token->text);
    PyObject_Free(token);
}

static PyObject *token_repr(TokenObject *token) {
    return PyUnicode_FromFormat("Token(kind=%R, text=%R, pos=%zd)", token->kind, token->text,
                                token->pos);
}

static PyObject *token_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(a, &TokenType) || !Py_IS_TYPE(b, &TokenType))
        Py_RETURN_NOTIMPLEMENTED;
    TokenObject *x = (TokenObject *)a, *y = (TokenObject *)b;
    int equal = x->pos == y->pos;
    if (equal) {
        equal = PyObject_RichCompareBool(x->kind, y->kind, Py_EQ);
        if (equal > 0)
            equal = PyObject_RichCompareBool(x->text, y->text, Py_EQ);
        if (equal < 0)
            return NULL;
    }
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

static Py_hash_t token_hash(TokenObject *token) {
    PyObject *key = Py_BuildValue("(OOn)", token->kind, token->text, token->pos);
    if (key == NULL)
        return -1;
    Py_hash_t hash = PyObject_Hash(key);
    Py_DECREF(key);
    return hash;
}

static PyMemberDef token_members[] = {
    {"kind", T_OBJECT_EX, offsetof(TokenObject, kind), READONLY, "value, symbol, hash, bang, "
     "string, number, ident, punct or eof"},
    {"text", T_OBJECT_EX, offsetof(TokenObject, text), READONLY, "the token's text"},
    {"pos", T_PYSSIZET, offsetof(TokenObject, pos), READONLY, "where it starts"},
    {NULL},
};

static PyTypeObject TokenType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilebc._speedups.Token",
    .tp_basicsize = sizeof(TokenObject),
    .tp_dealloc = (destructor)token_dealloc,
    .tp_repr = (reprfunc)token_repr,
    .tp_hash = (hashfunc)token_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Token(kind, text, pos): one token of Tile IR text (immutable)",
    .tp_richcompare = token_richcompare,
    .tp_members = token_members,
    .tp_new = token_new,
};

/* ---- CursorBase --------------------------------------------------------------------------- */


static PyObject *name_peek_checked, *name_expect_failed, *name_expect_kind_failed;
static PyTypeObject CursorType;
static PyObject *cursor_peek(CursorObject *self, PyObject *unused);

static int cursor_traverse(CursorObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->text);
    Py_VISIT(self->peeked);
    return 0;
}

static int cursor_clear(CursorObject *self) {
    Py_CLEAR(self->text);
    Py_CLEAR(self->peeked);
    return 0;
}

/* A Python subclass's instances come here through subtype_dealloc, which releases their
 * (heap) type itself: this static base must not. */
static void cursor_dealloc(CursorObject *self) {
    PyObject_GC_UnTrack(self);
    cursor_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The next token (a new reference): the one peeked while it is still ahead, else scanned here,
 * else read by the subclass's _peek_checked(). */
static PyObject *cursor_peek_token(CursorObject *self) {
    PyObject *peeked = self->peeked;
    if (peeked != NULL && Py_IS_TYPE(peeked, &TokenType)
            && ((TokenObject *)peeked)->pos >= self->pos) {
        Py_INCREF(peeked);
        return peeked;
    }
    PyObject *text = self->text;
    if (text == NULL || !PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "Cursor.text must be a str");
        return NULL;
    }
    if (ready(text) < 0)
        return NULL;
    PyObject *token_kind;
    Py_ssize_t start, stop;
    if (!scan(text, self->pos, &token_kind, &start, &stop))
        return PyObject_CallMethodNoArgs((PyObject *)self, name_peek_checked);
    PyObject *token_text = PyUnicode_Substring(text, start, stop);
    if (token_text == NULL)
        return NULL;
    PyObject *token = token_make(token_kind, token_text, start);
    Py_DECREF(token_text);
    if (token == NULL)
        return NULL;
    Py_INCREF(token);
    Py_XSETREF(self->peeked, token);
    self->pos = start;
    return token;
}

static int check_token(PyObject *token) {
    if (Py_IS_TYPE(token, &TokenType))
        return 0;
    PyErr_Format(PyExc_TypeError, "_peek_checked() returned %.100s, not a Token",
                 Py_TYPE(token)->tp_name);
    return -1;
}

/* Consume `token`, which ends `length` characters after its start. */
static void cursor_advance(CursorObject *self, PyObject *token, Py_ssize_t length) {
    self->pos = self->end = ((TokenObject *)token)->pos + length;
    Py_CLEAR(self->peeked);
}

int tilebc_scan(PyObject *text, Py_ssize_t pos, PyObject **kind, Py_ssize_t *start,
                Py_ssize_t *stop) {
    return scan(text, pos, kind, start, stop);
}

int tilebc_recoverable(void) {
    PyObject *raised = PyErr_Occurred();
    if (raised == NULL)
        return 1;
    if (!PyErr_GivenExceptionMatches(raised, PyExc_Exception)
            || PyErr_GivenExceptionMatches(raised, PyExc_MemoryError))
        return 0;
    PyErr_Clear();
    return 1;
}

PyObject *tilebc_token_make(PyObject *kind, PyObject *text, Py_ssize_t pos) {
    return token_make(kind, text, pos);
}

PyObject *tilebc_cursor_peek(CursorObject *cursor) {
    return cursor_peek(cursor, NULL);
}

void tilebc_cursor_advance(CursorObject *cursor, PyObject *token) {
    cursor_advance(cursor, token, PyUnicode_GET_LENGTH(((TokenObject *)token)->text));
}

int tilebc_is_cursor(PyObject *object) {
    return PyObject_TypeCheck(object, &CursorType);
}

static PyObject *cursor_peek(CursorObject *self, PyObject *unused) {
    PyObject *token = cursor_peek_token(self);
    if (token != NULL && check_token(token) < 0)
        Py_CLEAR(token);
    return token;
}

static PyObject *cursor_next(CursorObject *self, PyObject *unused) {
    PyObject *token = cursor_peek(self, NULL);
    if (token != NULL)
        cursor_advance(self, token, PyUnicode_GET_LENGTH(((TokenObject *)token)->text));
    return token;
}

/* 1 when the next token's text is `text`, 0 when not, -1 on error; *token_out gets the token. */
static int cursor_is(CursorObject *self, PyObject *text, PyObject **token_out) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "expected a str");
        return -1;
    }
    PyObject *token = cursor_peek(self, NULL);
    if (token == NULL)
        return -1;
    int equal = PyUnicode_Compare(((TokenObject *)token)->text, text) == 0;
    if (PyErr_Occurred()) {
        Py_DECREF(token);
        return -1;
    }
    *token_out = token;
    return equal;
}

static PyObject *cursor_at(CursorObject *self, PyObject *text) {
    PyObject *token;
    int equal = cursor_is(self, text, &token);
    if (equal < 0)
        return NULL;
    Py_DECREF(token);
    return PyBool_FromLong(equal);
}

static PyObject *cursor_accept(CursorObject *self, PyObject *text) {
    PyObject *token;
    int equal = cursor_is(self, text, &token);
    if (equal < 0)
        return NULL;
    if (equal)
        cursor_advance(self, token, PyUnicode_GET_LENGTH(text));
    Py_DECREF(token);
    return PyBool_FromLong(equal);
}

static PyObject *cursor_expect(CursorObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "expect(text, what=None)");
        return NULL;
    }
    PyObject *token;
    int equal = cursor_is(self, args[0], &token);
    if (equal < 0)
        return NULL;
    if (equal) {
        cursor_advance(self, token, PyUnicode_GET_LENGTH(args[0]));
        return token;
    }
    PyObject *what = nargs > 1 ? args[1] : Py_None;
    PyObject *result = PyObject_CallMethodObjArgs((PyObject *)self, name_expect_failed, token,
                                                  args[0], what, NULL);
    Py_DECREF(token);
    return result;
}

static PyObject *cursor_expect_kind(CursorObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expect_kind(kind, what)");
        return NULL;
    }
    PyObject *token = cursor_peek(self, NULL);
    if (token == NULL)
        return NULL;
    int equal = PyObject_RichCompareBool(((TokenObject *)token)->kind, args[0], Py_EQ);
    if (equal < 0) {
        Py_DECREF(token);
        return NULL;
    }
    if (equal) {
        cursor_advance(self, token, PyUnicode_GET_LENGTH(((TokenObject *)token)->text));
        return token;
    }
    PyObject *result = PyObject_CallMethodObjArgs((PyObject *)self, name_expect_kind_failed,
                                                  token, args[0], args[1], NULL);
    Py_DECREF(token);
    return result;
}

static PyMethodDef cursor_methods[] = {
    {"peek", (PyCFunction)cursor_peek, METH_NOARGS, "the next token, not consumed"},
    {"next", (PyCFunction)cursor_next, METH_NOARGS, "the next token, consumed"},
    {"at", (PyCFunction)cursor_at, METH_O, "whether the next token's text is `text`"},
    {"accept", (PyCFunction)cursor_accept, METH_O,
     "consume the next token when its text is `text`; whether it did"},
    {"expect", (PyCFunction)(void (*)(void))cursor_expect, METH_FASTCALL,
     "the next token, consumed, when its text is `text`; else _expect_failed(token, text, what)"},
    {"expect_kind", (PyCFunction)(void (*)(void))cursor_expect_kind, METH_FASTCALL,
     "the next token, consumed, when its kind is `kind`; else _expect_kind_failed(token, kind, "
     "what)"},
    {NULL},
};

static PyMemberDef cursor_members[] = {
    {"text", T_OBJECT, offsetof(CursorObject, text), 0, "the text being read"},
    {"pos", T_PYSSIZET, offsetof(CursorObject, pos), 0, "where scanning resumes"},
    {"end", T_PYSSIZET, offsetof(CursorObject, end), 0, "where the last token read ends"},
    {"_peeked", T_OBJECT, offsetof(CursorObject, peeked), 0, "the token peek() read last"},
    {NULL},
};

static PyTypeObject CursorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilebc._speedups.CursorBase",
    .tp_basicsize = sizeof(CursorObject),
    .tp_dealloc = (destructor)cursor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The token-level methods of tilebc.text.lexer.Cursor (subclass it)",
    .tp_traverse = (traverseproc)cursor_traverse,
    .tp_clear = (inquiry)cursor_clear,
    .tp_methods = cursor_methods,
    .tp_members = cursor_members,
    .tp_new = PyType_GenericNew,
    .tp_free = PyObject_GC_Del,
};

/* FieldNames: the names of an op's compact fields, a tuple of its own type, so that no other
 * tuple in an op's slot reads as compact fields (tilebc_compact_fields). Made by the decoder. */
PyTypeObject TilebcFieldNamesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilebc._speedups.FieldNames",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_TUPLE_SUBCLASS,
    .tp_doc = "The names of a decoded op's compact operands or attributes",
};

PyObject *tilebc_field_names(PyObject *names) {
    return PyObject_CallOneArg((PyObject *)&TilebcFieldNamesType, names);
}

/* FieldsSlot(member): DecodedOp's `operands` and `attrs` over Op's slots (`member`). The C
 * decoder leaves an op's fields compact, a tuple (names, value, ...) (tilebc_compact_fields);
 * the C loops read them so, and the first read from Python turns them into the dict, kept in the
 * slot, so that the op behaves as one holding a dict throughout (one dict, mutable, the same
 * object on every read). */
typedef struct {
    PyObject_HEAD
    PyObject *member;  /* a member descriptor (a slot) */
} FieldsSlotObject;

PyObject *tilebc_fields_dict(PyObject *compact) {
    PyObject *names = PyTuple_GET_ITEM(compact, 0), *dict = PyDict_New();
    for (Py_ssize_t i = 0; dict != NULL && i < PyTuple_GET_SIZE(names); i++)
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(names, i), PyTuple_GET_ITEM(compact, i + 1)) < 0)
            Py_CLEAR(dict);
    return dict;
}

static PyObject *fields_slot_get(FieldsSlotObject *self, PyObject *object, PyObject *type) {
    if (object == NULL || object == Py_None)
        return Py_NewRef(self);
    descrgetfunc get = Py_TYPE(self->member)->tp_descr_get;
    PyObject *value = get(self->member, object, type);
    if (value == NULL || !tilebc_compact_fields(value))
        return value;
    PyObject *dict = tilebc_fields_dict(value);
    Py_DECREF(value);
    if (dict == NULL)
        return NULL;
    /* making the dict may have run Python code (a collection's finalizers) that read the
     * fields first: the dict already there is the op's */
    PyObject *now = get(self->member, object, type);
    if (now == NULL || !tilebc_compact_fields(now)) {
        Py_DECREF(dict);
        return now;
    }
    Py_DECREF(now);
    if (Py_TYPE(self->member)->tp_descr_set(self->member, object, dict) < 0)
        Py_CLEAR(dict);
    return dict;
}

static int fields_slot_set(FieldsSlotObject *self, PyObject *object, PyObject *value) {
    return Py_TYPE(self->member)->tp_descr_set(self->member, object, value);
}

static PyObject *fields_slot_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *member;
    if (!PyArg_ParseTuple(args, "O!:FieldsSlot", &PyMemberDescr_Type, &member))
        return NULL;
    FieldsSlotObject *self = (FieldsSlotObject *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->member = Py_NewRef(member);
    return (PyObject *)self;
}

static void fields_slot_dealloc(FieldsSlotObject *self) {
    Py_XDECREF(self->member);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject FieldsSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilebc._speedups.FieldsSlot",
    .tp_basicsize = sizeof(FieldsSlotObject),
    .tp_dealloc = (destructor)fields_slot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FieldsSlot(member): an op's operands or attrs over its slot; the decoder's compact "
              "fields become the dict on first read",
    .tp_descr_get = (descrgetfunc)fields_slot_get,
    .tp_descr_set = (descrsetfunc)fields_slot_set,
    .tp_new = fields_slot_new,
};

int tilebc_is_fields_slot(PyObject *descriptor) {
    return descriptor != NULL && Py_IS_TYPE(descriptor, &FieldsSlotType);
}

Py_ssize_t tilebc_member_offset(PyObject *descriptor, PyTypeObject *type, int written) {
    if (descriptor == NULL || !Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
            || !PyType_IsSubtype(type, PyDescr_TYPE(descriptor)))
        return -1;
    PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
    if (member->type != T_OBJECT_EX || (written && (member->flags & READONLY)))
        return -1;
    return member->offset;
}

PyObject *tilebc_slot_miss(PyObject *object, PyObject *name, TilebcSlotCache *cache) {
    PyTypeObject *type = Py_TYPE(object);
    if (PyUnicode_CheckExact(name)) {
        PyObject *descriptor = _PyType_Lookup(type, name);  /* borrowed; gives the type a tag */
        if (cache->raw && tilebc_is_fields_slot(descriptor))  /* the slot under it */
            descriptor = ((FieldsSlotObject *)descriptor)->member;
        Py_ssize_t offset = type->tp_getattro == PyObject_GenericGetAttr
                            ? tilebc_member_offset(descriptor, type, 0) : -1;
        if (tilebc_version_valid(type)) {  /* the offset kept while the type stays as it is */
            int at = 0;
            while (at < cache->used && cache->entries[at].type != type)
                at++;
            if (at < TILEBC_SLOT_TYPES) {
                cache->entries[at].type = type;
                cache->entries[at].version = type->tp_version_tag;
                cache->entries[at].offset = offset;
                if (at == cache->used)
                    cache->used++;
            }
        }
        if (cache->raw && offset >= 0) {  /* the slot under a property: read whether kept or not */
            PyObject *value = *(PyObject **)((char *)object + offset);
            if (value != NULL)
                return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(object, name);
}

/* The hash of an instance of a class that keeps it in its `_hash` field (ir/shared.py
 * cached_hash), read here without a Python frame; the class's own __hash__ makes it the first
 * time. Debug attributes and types are hashed several times each as dict keys. */
static PyObject *name_hash_field, *name_dunder_hash, *name_hash_fields;

/* hash(tuple(getattr(self, name) for name in type(self)._hash_fields)), kept in the instance's
 * `_hash` as the class's __hash__ keeps it (a new int); that method where the class names no
 * fields. */
static PyObject *made_hash(PyObject *self) {
    PyObject *names = PyObject_GetAttr((PyObject *)Py_TYPE(self), name_hash_fields);
    if (names == NULL || !PyTuple_Check(names)) {
        Py_XDECREF(names);
        PyErr_Clear();
        return PyObject_CallMethodNoArgs(self, name_dunder_hash);
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    PyObject *fields = PyTuple_New(count), *value = NULL;
    for (Py_ssize_t i = 0; fields != NULL && i < count; i++) {
        PyObject *field = PyObject_GetAttr(self, PyTuple_GET_ITEM(names, i));
        if (field == NULL)
            Py_CLEAR(fields);
        else
            PyTuple_SET_ITEM(fields, i, field);
    }
    Py_DECREF(names);
    if (fields == NULL)
        return NULL;
    Py_hash_t hash = PyObject_Hash(fields);
    Py_DECREF(fields);
    if (hash == -1)
        return NULL;
    value = PyLong_FromSsize_t(hash);
    PyObject *own = value == NULL ? NULL : PyObject_GenericGetDict(self, NULL);
    int failed = own == NULL || PyDict_SetItem(own, name_hash_field, value) < 0;
    Py_XDECREF(own);
    if (failed)
        Py_CLEAR(value);
    return value;
}

static Py_hash_t kept_hash_slot(PyObject *self) {
    PyObject *own = PyObject_GenericGetDict(self, NULL), *value = NULL;
    if (own == NULL)
        return -1;
    PyObject *kept = PyDict_Check(own) ? PyDict_GetItemWithError(own, name_hash_field) : NULL;
    if (kept != NULL && PyLong_CheckExact(kept))
        value = Py_NewRef(kept);
    Py_DECREF(own);
    if (value == NULL) {
        if (PyErr_Occurred())
            return -1;
        value = made_hash(self);
        if (value == NULL)
            return -1;
    }
    Py_hash_t hash = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    if (hash == -1 && !PyErr_Occurred())
        hash = -2;  /* as Python's own slot answers for -1 */
    return hash;
}

/* Where the next `mark` lies in `piece` from `from` (its length when none): memchr on a one-byte
 * str, PyUnicode_FindChar otherwise. */
static Py_ssize_t next_mark(PyObject *piece, Py_UCS4 mark, Py_ssize_t from, Py_ssize_t length) {
    if (PyUnicode_KIND(piece) == PyUnicode_1BYTE_KIND && mark < 256) {
        const char *data = (const char *)PyUnicode_DATA(piece);
        const char *at = memchr(data + from, (int)mark, (size_t)(length - from));
        return at == NULL ? length : at - data;
    }
    Py_ssize_t at = PyUnicode_FindChar(piece, mark, from, length, 1);
    return at < 0 ? length : at;  /* (-2, an error, cannot happen within bounds) */
}

/* fill_marks(pieces, texts, mark): each occurrence of the one-character `mark` in the strs
 * `pieces` replaced by the next of the strs `texts`, in order (tilebc/alias_aside.py puts the
 * child's location texts in the parent's `-g` text): a new list; None where the pieces hold
 * another count of marks than there are texts (nothing is made then). */
static PyObject *fill_marks_in(PyObject *pieces, PyObject *texts, Py_UCS4 mark);

static PyObject *fill_marks(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])
            || !PyUnicode_Check(args[2]) || PyUnicode_GET_LENGTH(args[2]) != 1) {
        PyErr_SetString(PyExc_TypeError, "fill_marks(pieces: list, texts: list, mark: one "
                                         "character)");
        return NULL;
    }
    Py_UCS4 mark = PyUnicode_READ_CHAR(args[2], 0);
    if (mark >= 128) {  /* an ASCII mark: a piece less its marks needs no wider kind than it had */
        PyErr_SetString(PyExc_ValueError, "fill_marks: the mark must be an ASCII character");
        return NULL;
    }
    /* copies: making the new strs may run Python code (a collection's finalizers) */
    PyObject *pieces = PySequence_Tuple(args[0]), *texts = PySequence_Tuple(args[1]);
    PyObject *filled = pieces != NULL && texts != NULL ? fill_marks_in(pieces, texts, mark)
                                                       : NULL;
    Py_XDECREF(pieces);
    Py_XDECREF(texts);
    return filled;
}

/* fill_marks on tuple copies of its lists */
static PyObject *fill_marks_in(PyObject *pieces, PyObject *texts, Py_UCS4 mark) {
    Py_ssize_t count = PyTuple_GET_SIZE(pieces), marks = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, i);
        if (!PyUnicode_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "fill_marks: a piece is not a str");
            return NULL;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(piece);
        for (Py_ssize_t at = next_mark(piece, mark, 0, length); at < length;
                at = next_mark(piece, mark, at + 1, length))
            marks++;
    }
    if (marks != PyTuple_GET_SIZE(texts))
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < marks; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(texts, i))) {
            PyErr_SetString(PyExc_TypeError, "fill_marks: a text is not a str");
            return NULL;
        }
    PyObject *filled = PyList_New(count);
    Py_ssize_t next = 0;  /* the text of the next mark */
    for (Py_ssize_t i = 0; filled != NULL && i < count; i++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, i), *made = NULL;
        Py_ssize_t length = PyUnicode_GET_LENGTH(piece), found = 0, size = length;
        Py_UCS4 widest = PyUnicode_MAX_CHAR_VALUE(piece);
        for (Py_ssize_t at = next_mark(piece, mark, 0, length); at < length;
                at = next_mark(piece, mark, at + 1, length)) {
            PyObject *text = PyTuple_GET_ITEM(texts, next + found);
            size += PyUnicode_GET_LENGTH(text) - 1;
            if (PyUnicode_MAX_CHAR_VALUE(text) > widest)
                widest = PyUnicode_MAX_CHAR_VALUE(text);
            found++;
        }
        if (found == 0) {
            PyList_SET_ITEM(filled, i, Py_NewRef(piece));
            continue;
        }
        made = PyUnicode_New(size, widest);
        /* one-byte strs (the usual text) copied with memcpy, others character by kind */
        int bytes = made != NULL && PyUnicode_KIND(made) == PyUnicode_1BYTE_KIND;
        Py_ssize_t from = 0, to = 0;
        for (Py_ssize_t k = 0; made != NULL && k < found; k++) {
            Py_ssize_t at = next_mark(piece, mark, from, length);
            PyObject *text = PyTuple_GET_ITEM(texts, next + k);
            Py_ssize_t text_length = PyUnicode_GET_LENGTH(text);
            if (bytes) {
                char *out = (char *)PyUnicode_DATA(made);
                memcpy(out + to, (const char *)PyUnicode_DATA(piece) + from, (size_t)(at - from));
                memcpy(out + to + at - from, PyUnicode_DATA(text), (size_t)text_length);
            } else if (PyUnicode_CopyCharacters(made, to, piece, from, at - from) < 0
                       || PyUnicode_CopyCharacters(made, to + at - from, text, 0,
                                                   text_length) < 0) {
                Py_CLEAR(made);
                break;
            }
            to += at - from + text_length;
            from = at + 1;
        }
        if (made != NULL && bytes)
            memcpy((char *)PyUnicode_DATA(made) + to, (const char *)PyUnicode_DATA(piece) + from,
                   (size_t)(length - from));
        else if (made != NULL && PyUnicode_CopyCharacters(made, to, piece, from, length - from) < 0)
            Py_CLEAR(made);
        if (made == NULL) {
            Py_CLEAR(filled);
            break;
        }
        PyList_SET_ITEM(filled, i, made);
        next += found;
    }
    return filled;
}

/* keep_hash(cls): instances of `cls` (a class with a __dict__ whose __hash__ keeps its answer in
 * the instance's `_hash`, made from the fields its `_hash_fields` names) hashed by
 * kept_hash_slot */
static PyObject *keep_hash(PyObject *module, PyObject *cls) {
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)
            || ((PyTypeObject *)cls)->tp_dictoffset == 0) {
        PyErr_SetString(PyExc_TypeError, "keep_hash: a class with instance dicts");
        return NULL;
    }
    ((PyTypeObject *)cls)->tp_hash = kept_hash_slot;
    Py_RETURN_NONE;
}


/* The object allocator's arenas (1 MiB each) populated as they are mapped: a one-shot command
 * builds a module of tens of MiB in a fresh process, which the kernel otherwise faults in one
 * 4 KiB page per trap (a third of decoding's time); one madvise per arena does the same work
 * for about two thirds of the cost. The arenas are mapped and unmapped as CPython's own are, so
 * those mapped before stay compatible. Installed only where the kernel populates (Linux 5.14
 * and later) and the build allocates objects in arenas (not free-threaded). */
#if defined(__linux__) && !defined(Py_GIL_DISABLED)
#define TILEBC_POPULATE 1
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static void *populated_arena(void *context, size_t size) {
    void *arena = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED)
        return NULL;
    (void)madvise(arena, size, MADV_POPULATE_WRITE);  /* refused: its pages fault as usual */
    return arena;
}

static void unmapped_arena(void *context, void *arena, size_t size) {
    munmap(arena, size);
}
#endif

static PyObject *populate_arenas(PyObject *module, PyObject *unused) {
#if defined(TILEBC_POPULATE)
    static int done = 0;
    if (done)
        Py_RETURN_TRUE;
    /* a page asked first: an older kernel refuses MADV_POPULATE_WRITE (EINVAL) */
    long page = sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (probe == MAP_FAILED)
        Py_RETURN_FALSE;
    int refused = madvise(probe, (size_t)page, MADV_POPULATE_WRITE) != 0;
    munmap(probe, (size_t)page);
    if (refused)
        Py_RETURN_FALSE;
    PyObjectArenaAllocator allocator = {NULL, populated_arena, unmapped_arena};
    PyObject_SetArenaAllocator(&allocator);
    done = 1;
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"populate_arenas", populate_arenas, METH_NOARGS,
     "populate_arenas() -> bool: the object allocator's later arenas populated as they are "
     "mapped, where the kernel does it (a process that builds a large module at once)"},
    {"scan_token", (PyCFunction)(void (*)(void))scan_token, METH_FASTCALL,
     "scan_token(text, pos) -> (kind, text, start) or None (see the module's source)"},
    {"fill_marks", (PyCFunction)(void (*)(void))fill_marks, METH_FASTCALL,
     "fill_marks(pieces, texts, mark) -> list or None: each mark in the pieces replaced by the "
     "next text (None where the counts differ)"},
    {"keep_hash", keep_hash, METH_O,
     "keep_hash(cls): hash instances of cls by their kept `_hash`, made by cls.__hash__ once"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tilebc._speedups",
    "Optional compiled helpers for tilebc's text tools (pure-Python fallbacks in tilebc.speedups)",
    -1, methods,
};

int add_op_decoder(PyObject *module);  /* _opdecoder.c */
int add_printer(PyObject *module);  /* _printer.c */
int add_verifier(PyObject *module);  /* _verifier.c */
int add_op_encoder(PyObject *module);  /* _opencoder.c */
int add_op_parser(PyObject *module);  /* _opparser.c */

PyMODINIT_FUNC PyInit__speedups(void) {
    kind_value = PyUnicode_InternFromString("value");
    kind_hash = PyUnicode_InternFromString("hash");
    kind_bang = PyUnicode_InternFromString("bang");
    kind_ident = PyUnicode_InternFromString("ident");
    kind_punct = PyUnicode_InternFromString("punct");
    name_peek_checked = PyUnicode_InternFromString("_peek_checked");
    name_expect_failed = PyUnicode_InternFromString("_expect_failed");
    name_expect_kind_failed = PyUnicode_InternFromString("_expect_kind_failed");
    name_hash_field = PyUnicode_InternFromString("_hash");
    name_dunder_hash = PyUnicode_InternFromString("__hash__");
    name_hash_fields = PyUnicode_InternFromString("_hash_fields");
    if (!kind_value || !kind_hash || !kind_bang || !kind_ident || !kind_punct
            || !name_peek_checked || !name_expect_failed || !name_expect_kind_failed
            || !name_hash_field || !name_dunder_hash || !name_hash_fields)
        return NULL;
    TilebcFieldNamesType.tp_base = &PyTuple_Type;
    if (PyType_Ready(&TokenType) < 0 || PyType_Ready(&CursorType) < 0
            || PyType_Ready(&FieldsSlotType) < 0 || PyType_Ready(&TilebcFieldNamesType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    Py_INCREF(&TokenType);
    if (PyModule_AddObject(module, "Token", (PyObject *)&TokenType) < 0) {
        Py_DECREF(&TokenType);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&CursorType);
    if (PyModule_AddObject(module, "CursorBase", (PyObject *)&CursorType) < 0) {
        Py_DECREF(&CursorType);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddObject(module, "FieldsSlot", Py_NewRef(&FieldsSlotType)) < 0) {
        Py_DECREF(&FieldsSlotType);
        Py_DECREF(module);
        return NULL;
    }
    if (add_op_decoder(module) < 0 || add_printer(module) < 0 || add_verifier(module) < 0
            || add_op_encoder(module) < 0 || add_op_parser(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
