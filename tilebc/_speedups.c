/* Optional compiled helpers for the text tools' hottest loops (tilebc/speedups.py loads them).
 *
 * scan_token(text, pos): the lexer's common case in one call. Skips spaces and // comments from
 * `pos`, then reads one token of the kinds the lexer does not check further (value, hash, bang,
 * ident, punct) and returns (kind, text, start). It returns None for everything else: a string,
 * symbol or number token, the end of the input, a character no token starts with, any non-ASCII
 * character among the spaces or where a token starts. The Python lexer then reads the token its
 * own way (its regular expressions stay the one definition of the grammar; this must agree with
 * them whenever it returns a token).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyObject *scan_token(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "scan_token(text: str, pos: int)");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
#if PY_VERSION_HEX < 0x030C0000 /* strings are always ready from 3.12 on */
    if (PyUnicode_READY(text) < 0)
        return NULL;
#endif
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (pos < 0)
        Py_RETURN_NONE;
    /* spaces and comments (ASCII whitespace only: others go to the regular expressions) */
    for (;;) {
        if (pos >= n)
            Py_RETURN_NONE;
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
    Py_ssize_t start = pos;
    Py_UCS4 ch = PyUnicode_READ(kind, data, pos);
    Py_UCS4 next = pos + 1 < n ? PyUnicode_READ(kind, data, pos + 1) : 0;
    PyObject *token_kind;
    if (ch == '%') {
        if (!is_value_char(next))
            Py_RETURN_NONE;
        pos += 2;
        while (pos < n && is_value_char(PyUnicode_READ(kind, data, pos)))
            pos++;
        if (pos + 1 < n && PyUnicode_READ(kind, data, pos) == '#'
                && is_digit(PyUnicode_READ(kind, data, pos + 1))) {
            pos += 2;
            while (pos < n && is_digit(PyUnicode_READ(kind, data, pos)))
                pos++;
        }
        token_kind = kind_value;
    } else if (ch == '#' || ch == '!') {
        if (!is_name_start(next))
            Py_RETURN_NONE;
        pos += 2;
        while (pos < n && is_word(PyUnicode_READ(kind, data, pos)))
            pos++;
        token_kind = ch == '#' ? kind_hash : kind_bang;
    } else if (is_name_start(ch)) {
        pos++;
        while (pos < n && is_word(PyUnicode_READ(kind, data, pos)))
            pos++;
        token_kind = kind_ident;
    } else if (ch == '-') {
        if (is_digit(next))
            Py_RETURN_NONE; /* a negative number */
        pos += next == '>' ? 2 : 1;
        token_kind = kind_punct;
    } else if (ch < 128 && strchr("()[]{}<>,:=?^*+", (int)ch) != NULL && ch != 0) {
        pos++;
        token_kind = kind_punct;
    } else {
        Py_RETURN_NONE;
    }
    PyObject *token_text = PyUnicode_Substring(text, start, pos);
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

static PyMethodDef methods[] = {
    {"scan_token", (PyCFunction)(void (*)(void))scan_token, METH_FASTCALL,
     "scan_token(text, pos) -> (kind, text, start) or None (see the module's source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tilebc._speedups",
    "Optional compiled helpers for tilebc's text tools (pure-Python fallbacks in tilebc.speedups)",
    -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    kind_value = PyUnicode_InternFromString("value");
    kind_hash = PyUnicode_InternFromString("hash");
    kind_bang = PyUnicode_InternFromString("bang");
    kind_ident = PyUnicode_InternFromString("ident");
    kind_punct = PyUnicode_InternFromString("punct");
    if (!kind_value || !kind_hash || !kind_bang || !kind_ident || !kind_punct)
        return NULL;
    return PyModule_Create(&module);
}
