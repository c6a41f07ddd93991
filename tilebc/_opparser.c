/* The text parser's loop over a region's ops, in C (part of tilebc._speedups; the Python twin is
 * _Parser._block_ops with _op, the generated op functions of tilebc/text/parsegen.py, _build and
 * _finish_op in tilebc/text/parser.py, and tests/test_speedups.py compares the modules both make).
 *
 * parse_ops(parser, ops): after a region's `{`, reads its ops up to its `}` into the list `ops`.
 *
 * parser._fast_context holds (cursor, defined_at, known_types, shared_values, programs, Value,
 * token type, type parser); the scopes are parser.scopes. programs maps an op name as written to the
 * kind's program (tilebc/text/parsegen.py fast_program) or None, made on first sight by
 * parser._fast_program(name). An op of a kind with a program, written the usual way, is read
 * here: its result names, its name, each step of the program, then the op is built (operands and
 * attributes in the kind's order, defaults, result types as _build infers them), placed (its
 * line:col, a trailing loc(...) read by parser._loc) and its results named. Nothing is kept
 * before the op is complete: at anything else (a token the program does not expect, a type or
 * attribute text not read before, a value of another type, a name in use, a default that needs
 * Python) the cursor goes back to where the op starts and parser._next_op() reads it, so every
 * error and its message are the Python parser's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <structmember.h>
#include "_speedups.h"

enum { S_LITERAL, S_OPERAND, S_OPERANDS, S_ENUM, S_TYPE_OF, S_RESULT_TYPE, S_ATTR_DICT,
       S_PREDICATE, S_DENSE, S_ROUNDING, S_OPTIONAL, S_VIEW_ORDERING, S_INDEX_TYPES,
       S_MIXED_DIMS, S_TENSOR_VIEW_TYPES, S_INT };
enum { T_LITERAL, T_VALUE, T_KEYWORD, T_SETTLED };
enum { A_ABSENT, A_DEFAULT, A_DEFAULT_FOR };
enum { R_ONE, R_OPTIONAL, R_VARIADIC };
#define MAX_SLOTS 16
#define MAX_NAMES 16

static PyObject *s_fast_context, *s_scopes, *s_next_op, *s_fast_program, *s_loc, *s_line_col,
    *s_newlines, *s_type, *s_text_pos, *s_default_for, *s_results, *s_shape, *s_strides,
    *s_predicate, *s_dense_constant;

typedef struct {
    PyObject *parser;
    CursorObject *c;
    PyObject *scopes, *defined_at, *known, *shared, *programs, *token_type, *types;
    PyTypeObject *value_class;
    Py_ssize_t line_hint;  /* the line of the last op placed */
} Context;

typedef struct {
    PyObject *operands[MAX_SLOTS];  /* a Value or a tuple (variadic); NULL: not read */
    PyObject *attrs[MAX_SLOTS];
    PyObject *results[MAX_SLOTS];   /* result types the text wrote */
    unsigned written;               /* operand slots whose type the text wrote */
    PyObject *dims[2];              /* a tensor view's shape and strides as the text wrote them */
} OpState;

static void state_clear(OpState *state) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        Py_CLEAR(state->operands[i]);
        Py_CLEAR(state->attrs[i]);
        Py_CLEAR(state->results[i]);
    }
    Py_CLEAR(state->dims[0]);
    Py_CLEAR(state->dims[1]);
    state->written = 0;
}

#define TOKEN(t) ((TokenObject *)(t))

static int text_is(PyObject *token, const char *text) {
    return PyUnicode_CompareWithASCIIString(TOKEN(token)->text, text) == 0;
}

static int kind_is(PyObject *token, const char *kind) {
    return PyUnicode_CompareWithASCIIString(TOKEN(token)->kind, kind) == 0;
}

/* Consumes the next token when its text is `text`: 1; 0 when it is not; -1 error. */
static int take(Context *x, const char *text) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    int equal = text_is(token, text);
    if (equal)
        tilebc_cursor_advance(x->c, token);
    Py_DECREF(token);
    return equal;
}

/* The next token's text against a step's literal. 1 equal, 0 not, -1 error. */
static int next_is(Context *x, PyObject *literal, PyObject **token_out) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    int equal = PyUnicode_Compare(TOKEN(token)->text, literal) == 0;
    if (PyErr_Occurred()) {
        Py_DECREF(token);
        return -1;
    }
    *token_out = token;
    return equal;
}

static int is_type_start(Py_UCS4 ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' || ch == '!';
}

static int is_type_char(Py_UCS4 ch) {
    return is_type_start(ch) || (ch >= '0' && ch <= '9') || ch == '.';
}

/* Moves the cursor to `pos` as reading a token ending there does. */
static void move_to(Context *x, Py_ssize_t pos) {
    x->c->pos = x->c->end = pos;
    Py_CLEAR(x->c->peeked);
}

/* The object `table` holds for the text [start, stop) (borrowed), NULL when none (-1 error). */
static int lookup_text(PyObject *table, PyObject *text, Py_ssize_t start, Py_ssize_t stop,
                       PyObject **found) {
    PyObject *key = PyUnicode_Substring(text, start, stop);
    if (key == NULL)
        return -1;
    *found = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    return *found == NULL && PyErr_Occurred() ? -1 : 0;
}

/* Whether a Python call that may fail stands for a step: 1 with *found (new reference), 0 when
 * it raised an ordinary exception (the generated function then reads the op and raises the error
 * in its own place and words), -1 for one that must propagate (tilebc_recoverable). */
static int called(PyObject *result, PyObject **found) {
    if (result != NULL) {
        *found = result;
        return 1;
    }
    return tilebc_recoverable() ? 0 : -1;
}

/* A type. Its text (TYPE_SPAN's: a word and a <...> nesting up to three deep on one line) read
 * before is looked up in the TypeParser's table; else, where an ident or bang token starts, the
 * TypeParser reads it. 1: *found (new reference), the cursor after it; 0: not read here; -1:
 * error. *start_out: where its text starts. */
static int read_type(Context *x, PyObject **found, Py_ssize_t *start_out) {
    PyObject *text = x->c->text;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t pos = tilebc_skip_spaces(kind, data, n, x->c->pos), start = pos;
    if (pos >= n)
        return 0;
    Py_UCS4 first = PyUnicode_READ(kind, data, pos);
    Py_UCS4 second = pos + 1 < n ? PyUnicode_READ(kind, data, pos + 1) : 0;
    int word = (first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z') || first == '_';
    if (!word && !(first == '!' && ((second >= 'A' && second <= 'Z')
                                    || (second >= 'a' && second <= 'z') || second == '_')))
        return 0;  /* no ident or bang token: the generated function's error */
    *start_out = start;
    while (pos < n && is_type_char(PyUnicode_READ(kind, data, pos)))
        pos++;
    int spanned = 1;
    if (pos < n && PyUnicode_READ(kind, data, pos) == '<') {
        int depth = 0;
        do {
            Py_UCS4 ch = pos < n ? PyUnicode_READ(kind, data, pos++) : '\n';
            if ((ch == '<' && ++depth > 3) || ch == '\n') {
                spanned = 0;
                break;
            }
            if (ch == '>')
                depth--;
        } while (depth > 0);
    }
    PyObject *type = NULL;
    if (spanned && lookup_text(x->known, text, start, pos, &type) < 0)
        return -1;
    if (type != NULL) {
        *found = Py_NewRef(type);
        move_to(x, pos);
        return 1;
    }
    return called(PyObject_CallMethodNoArgs(x->types, s_type), found);
}

/* An assume predicate (`[#cuda_tile.]word<...>`) or a dense constant with its tile type
 * (`<...> : tile<...>`) read before: the shared attribute the parser made of the same text.
 * 1: *found (new reference), the cursor after it; 0: not one read before; -1: error. */
static int read_shared(Context *x, int dense, PyObject **found) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    Py_ssize_t pos = TOKEN(token)->pos, start = pos;
    Py_DECREF(token);
    PyObject *text = x->c->text;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
#define AT(p) ((p) < n ? PyUnicode_READ(kind, data, (p)) : 0)
    if (!dense) {
        while (pos < n && (is_type_char(AT(pos)) || AT(pos) == '#') && pos - start < 40)
            pos++;
    }
    if (AT(pos) != '<')
        goto python;
    Py_ssize_t open = ++pos;
    while (pos < n && AT(pos) != '<' && AT(pos) != '>' && pos - open < 200)
        pos++;
    if (AT(pos) != '>')
        goto python;
    pos++;
    if (dense) {
        if (AT(pos) == ' ')
            pos++;
        if (AT(pos) != ':')
            goto python;
        pos++;
        if (AT(pos) == ' ')
            pos++;
        static const char tile[] = "tile<";
        for (int i = 0; tile[i]; i++, pos++)
            if (AT(pos) != (Py_UCS4)tile[i])
                goto python;
        open = pos;
        while (pos < n && AT(pos) != '<' && AT(pos) != '>' && pos - open < 40)
            pos++;
        if (AT(pos) != '>')
            goto python;
        pos++;
    }
#undef AT
    if (lookup_text(x->shared, text, start, pos, found) < 0)
        return -1;
    if (*found != NULL) {
        Py_INCREF(*found);
        move_to(x, pos);
        return 1;
    }
python:  /* read the first time, or written otherwise: by the parser's method (which keeps it) */
    return called(PyObject_CallMethodNoArgs(x->parser, dense ? s_dense_constant : s_predicate),
                  found);
}

/* An operand `%name` (or `%name#i` of a result group) defined in an enclosing scope.
 * 1: *value (new reference); 0: anything else; -1: error. */
static int use(Context *x, OpState *state, PyObject **value) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    int status = 0;
    PyObject *name = NULL;
    PyObject *text = TOKEN(token)->text;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), index = -1;
    if (!kind_is(token, "value"))
        goto done;
    Py_ssize_t hash = PyUnicode_FindChar(text, '#', 0, length, 1);
    if (hash == -2) {
        status = -1;
        goto done;
    }
    if (hash >= 0) {  /* the scanner reads `#` only before digits */
        if (length - hash - 1 > 9)
            goto done;
        index = 0;
        for (Py_ssize_t i = hash + 1; i < length; i++) {
            Py_UCS4 digit = PyUnicode_READ_CHAR(text, i);
            if (digit < '0' || digit > '9')
                goto done;
            index = index * 10 + (Py_ssize_t)(digit - '0');
        }
        if (hash + 1 == length)
            goto done;
        name = PyUnicode_Substring(text, 0, hash);
        if (name == NULL) {
            status = -1;
            goto done;
        }
    } else {
        name = Py_NewRef(text);
    }
    PyObject *found = NULL;
    for (Py_ssize_t i = PyList_GET_SIZE(x->scopes) - 1; i >= 0 && found == NULL; i--) {
        PyObject *scope = PyList_GET_ITEM(x->scopes, i);
        if (!PyDict_CheckExact(scope))
            goto done;
        found = PyDict_GetItemWithError(scope, name);
        if (found == NULL && PyErr_Occurred()) {
            status = -1;
            goto done;
        }
    }
    if (found != NULL && index >= 0) {  /* a result of a group, in range */
        found = PyList_CheckExact(found) && index < PyList_GET_SIZE(found)
            ? PyList_GET_ITEM(found, index) : NULL;
    }
    if (found == NULL || Py_TYPE(found) != x->value_class)
        goto done;
    tilebc_cursor_advance(x->c, token);
    *value = Py_NewRef(found);
    status = 1;
done:
    Py_XDECREF(name);
    Py_DECREF(token);
    return status;
}

/* A comma-separated run of values; a comma not followed by a value is left (as the generated
 * function leaves it, with the cursor's end after that comma). */
static int use_many(Context *x, OpState *state, PyObject **tuple) {
    PyObject *values = PyList_New(0);
    if (values == NULL)
        return -1;
    int status = 1;
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        goto error;
    int first = kind_is(token, "value");
    Py_DECREF(token);
    if (first) {
        for (;;) {
            PyObject *value;
            status = use(x, state, &value);
            if (status <= 0)
                goto done;
            int appended = PyList_Append(values, value);
            Py_DECREF(value);
            if (appended < 0)
                goto error;
            token = tilebc_cursor_peek(x->c);
            if (token == NULL)
                goto error;
            if (!text_is(token, ",")) {
                Py_DECREF(token);
                break;
            }
            Py_ssize_t pos = x->c->pos;
            PyObject *comma = token;
            tilebc_cursor_advance(x->c, comma);
            PyObject *next = tilebc_cursor_peek(x->c);
            if (next == NULL) {
                Py_DECREF(comma);
                goto error;
            }
            int more = kind_is(next, "value");
            Py_DECREF(next);
            if (!more) {  /* _next_is_value's look back: pos and the peeked comma, end kept */
                x->c->pos = pos;
                Py_XSETREF(x->c->peeked, comma);
                break;
            }
            Py_DECREF(comma);
        }
    }
    *tuple = PyList_AsTuple(values);
    status = *tuple == NULL ? -1 : 1;
    goto done;
error:
    status = -1;
done:
    Py_DECREF(values);
    return status;
}

/* A plain decimal integer token (what int(text, 0) reads without a prefix or an underscore),
 * short enough for a C long long: *value (new reference). 1, 0 (anything else), -1 error. */
static int read_int(Context *x, PyObject **value) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    PyObject *text = TOKEN(token)->text;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    int ok = kind_is(token, "number") && n > 0 && n <= 18;
    if (ok && PyUnicode_READ_CHAR(text, 0) == '-')
        i = 1;
    ok = ok && i < n && (PyUnicode_READ_CHAR(text, i) != '0' || i + 1 == n);
    for (; ok && i < n; i++)
        ok = PyUnicode_READ_CHAR(text, i) >= '0' && PyUnicode_READ_CHAR(text, i) <= '9';
    int status = 0;
    if (ok) {
        *value = PyLong_FromUnicodeObject(text, 10);
        status = *value == NULL ? -1 : 1;
        if (status == 1)
            tilebc_cursor_advance(x->c, token);
    }
    Py_DECREF(token);
    return status;
}

/* load_view_tko's and store_view_tko's ordering: a keyword, then no scope after `weak` and no
 * word that is not a scope (the Python parser's errors). */
static int view_ordering(Context *x, PyObject *step, OpState *state) {
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        return -1;
    PyObject *member = PyDict_GetItemWithError(PyTuple_GET_ITEM(step, 2), TOKEN(token)->text);
    if (member == NULL) {
        Py_DECREF(token);
        return PyErr_Occurred() ? -1 : 0;
    }
    tilebc_cursor_advance(x->c, token);
    Py_DECREF(token);
    Py_XSETREF(state->attrs[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))], Py_NewRef(member));
    PyObject *scope = tilebc_cursor_peek(x->c);
    if (scope == NULL)
        return -1;
    int status = 1;
    if (kind_is(scope, "ident")) {
        status = member != PyTuple_GET_ITEM(step, 3)
            ? PyDict_Contains(PyTuple_GET_ITEM(step, 4), TOKEN(scope)->text) : 0;
    }
    Py_DECREF(scope);
    return status;
}

/* The index types after a view's type: one per index, or one for all; never compared with the
 * index values (as the Python parser reads them). */
static int index_types(Context *x, PyObject *step, OpState *state) {
    PyObject *values = state->operands[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))];
    if (values == NULL || !PyTuple_CheckExact(values))
        return values == NULL ? 1 : 0;
    Py_ssize_t wanted = PyTuple_GET_SIZE(values), count = 0;
    if (wanted == 0)
        return 1;
    for (;;) {
        PyObject *comma = tilebc_cursor_peek(x->c);
        if (comma == NULL)
            return -1;
        if (!text_is(comma, ",")) {
            Py_DECREF(comma);
            break;
        }
        Py_ssize_t pos = x->c->pos;
        tilebc_cursor_advance(x->c, comma);
        PyObject *next = tilebc_cursor_peek(x->c);
        if (next == NULL) {
            Py_DECREF(comma);
            return -1;
        }
        int stop = kind_is(next, "value") || text_is(next, "token");
        Py_DECREF(next);
        if (stop) {  /* a value or the token's type follows: the comma is not ours */
            x->c->pos = pos;
            Py_XSETREF(x->c->peeked, comma);
            break;
        }
        Py_DECREF(comma);
        PyObject *found;
        Py_ssize_t start;
        int status = read_type(x, &found, &start);
        if (status != 1)
            return status;
        Py_DECREF(found);
        if (++count == wanted)
            break;
    }
    return count == 1 || count == wanted;
}

/* make_tensor_view's `[` dims `]` body: integers and values; the values are the operand group,
 * the dims kept for the check against the type. */
static int mixed_dims(Context *x, PyObject *step, OpState *state) {
    PyObject *dims = PyList_New(0), *values = PyList_New(0);
    int status = dims == NULL || values == NULL ? -1 : 1;
    while (status == 1) {
        PyObject *token = tilebc_cursor_peek(x->c);
        if (token == NULL) {
            status = -1;
            break;
        }
        if (text_is(token, "]")) {
            Py_DECREF(token);
            break;
        }
        if (PyList_GET_SIZE(dims) > 0) {
            Py_DECREF(token);
            status = take(x, ",");
            if (status != 1)
                break;
            token = tilebc_cursor_peek(x->c);
            if (token == NULL) {
                status = -1;
                break;
            }
        }
        int value = kind_is(token, "value");
        Py_DECREF(token);
        PyObject *item;
        if (value) {
            status = use(x, state, &item);
            if (status == 1) {
                status = PyList_Append(values, item) < 0 ? -1 : 1;
                Py_DECREF(item);
                if (status == 1)
                    status = PyList_Append(dims, Py_None) < 0 ? -1 : 1;
            }
        } else {
            status = read_int(x, &item);
            if (status == 1) {
                status = PyList_Append(dims, item) < 0 ? -1 : 1;
                Py_DECREF(item);
            }
        }
    }
    if (status == 1) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
        long which = PyLong_AsLong(PyTuple_GET_ITEM(step, 2));
        PyObject *group = PyList_AsTuple(values), *written = PyList_AsTuple(dims);
        if (group == NULL || written == NULL || which < 0 || which > 1) {
            Py_XDECREF(group);
            Py_XDECREF(written);
            status = -1;
        } else {
            Py_XSETREF(state->operands[slot], group);
            Py_XSETREF(state->dims[which], written);
        }
    }
    Py_XDECREF(dims);
    Py_XDECREF(values);
    return status;
}

/* make_tensor_view's types: `type` or `type -> type`, the last a tensor view whose shape and
 * strides are the ones written. */
static int tensor_view_types(Context *x, PyObject *step, OpState *state) {
    PyObject *found;
    Py_ssize_t start;
    int status = read_type(x, &found, &start);
    if (status != 1)
        return status;
    PyObject *token = tilebc_cursor_peek(x->c);
    if (token == NULL) {
        Py_DECREF(found);
        return -1;
    }
    if (text_is(token, "->")) {
        tilebc_cursor_advance(x->c, token);
        Py_CLEAR(found);
        status = read_type(x, &found, &start);
    }
    Py_DECREF(token);
    if (status != 1)
        return status;
    status = PyObject_IsInstance(found, PyTuple_GET_ITEM(step, 1));
    PyObject *names[2] = {s_shape, s_strides};
    for (int which = 0; which < 2 && status == 1; which++) {
        if (state->dims[which] == NULL)
            continue;
        PyObject *typed = PyObject_GetAttr(found, names[which]);
        status = typed == NULL ? -1 : PyObject_RichCompareBool(state->dims[which], typed, Py_EQ);
        Py_XDECREF(typed);
    }
    if (status == 1)
        Py_XSETREF(state->results[0], found);
    else
        Py_DECREF(found);
    return status;
}

/* The program's steps from `index` for `count` steps. 1 read, 0 not for this loop, -1 error. */
static int run_steps(Context *x, PyObject *steps, Py_ssize_t index, Py_ssize_t count,
                     OpState *state) {
    Py_ssize_t stop = index + count;
    while (index < stop) {
        PyObject *step = PyTuple_GET_ITEM(steps, index++);
        long code = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
        PyObject *token = NULL;
        int status = 1;
        switch (code) {
        case S_LITERAL:
            status = next_is(x, PyTuple_GET_ITEM(step, 1), &token);
            if (status == 1)
                tilebc_cursor_advance(x->c, token);
            Py_XDECREF(token);
            break;
        case S_OPERAND:
        case S_OPERANDS: {
            long slot = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
            PyObject *value = NULL;
            status = code == S_OPERAND ? use(x, state, &value) : use_many(x, state, &value);
            if (status == 1)
                Py_XSETREF(state->operands[slot], value);
            break;
        }
        case S_ENUM: {
            token = tilebc_cursor_peek(x->c);
            if (token == NULL)
                return -1;
            PyObject *member = PyDict_GetItemWithError(PyTuple_GET_ITEM(step, 2),
                                                       TOKEN(token)->text);
            if (member != NULL) {
                tilebc_cursor_advance(x->c, token);
                Py_XSETREF(state->attrs[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))],
                           Py_NewRef(member));
            }
            status = member != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
            Py_DECREF(token);
            break;
        }
        case S_TYPE_OF: {
            long slot = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
            PyObject *group = state->operands[slot];
            Py_ssize_t many = group != NULL && PyTuple_CheckExact(group)
                ? PyTuple_GET_SIZE(group) : -1;
            if (group == NULL || many == 0 || (many < 0 && Py_TYPE(group) != x->value_class))
                return 0;  /* absent, empty or not read: the generated function's _type_element */
            for (Py_ssize_t i = 0; i < (many < 0 ? 1 : many) && status == 1; i++) {
                PyObject *value = many < 0 ? group : PyTuple_GET_ITEM(group, i);
                if (i > 0 && (status = take(x, ",")) != 1)
                    break;
                PyObject *found, *value_type;
                Py_ssize_t start;
                status = read_type(x, &found, &start);
                if (status != 1)
                    break;
                value_type = PyObject_GetAttr(value, s_type);
                if (value_type == NULL) {
                    Py_DECREF(found);
                    return -1;
                }
                status = found == value_type;  /* another type: the generated function's error */
                Py_DECREF(found);
                Py_DECREF(value_type);
            }
            if (status == 1)
                state->written |= 1u << slot;
            break;
        }
        case S_RESULT_TYPE: {
            PyObject *found;
            Py_ssize_t start;
            status = read_type(x, &found, &start);
            if (status != 1)
                break;
            PyObject *kind = PyTuple_GET_ITEM(step, 2);
            if (kind != Py_None) {  /* the kind the text names must be the result's */
                Py_ssize_t length = PyUnicode_GET_LENGTH(kind);
                PyObject *written = PyUnicode_Substring(x->c->text, start, start + length + 1);
                PyObject *wanted = written == NULL ? NULL : PyUnicode_FromFormat("%U<", kind);
                status = wanted == NULL ? -1 : PyUnicode_Compare(written, wanted) == 0;
                if (PyErr_Occurred())
                    status = -1;
                Py_XDECREF(written);
                Py_XDECREF(wanted);
                if (status != 1) {
                    Py_DECREF(found);
                    break;
                }
            }
            Py_XSETREF(state->results[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))], found);
            break;
        }
        case S_ATTR_DICT:
        case S_ROUNDING:
            token = tilebc_cursor_peek(x->c);
            if (token == NULL)
                return -1;
            /* attributes, or a rounding mode: the generated function reads them */
            status = code == S_ATTR_DICT ? !(text_is(token, "attributes") || text_is(token, "{"))
                                         : !text_is(token, "rounding");
            Py_DECREF(token);
            break;
        case S_PREDICATE:
        case S_DENSE: {
            PyObject *found;
            status = read_shared(x, code == S_DENSE, &found);
            if (status != 1)
                break;
            Py_XSETREF(state->attrs[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))], found);
            if (code == S_DENSE) {
                PyObject *type = PyObject_GetAttr(found, s_type);
                if (type == NULL)
                    return -1;
                Py_XSETREF(state->results[0], type);
            }
            break;
        }
        case S_VIEW_ORDERING:
        case S_INDEX_TYPES:
        case S_MIXED_DIMS:
        case S_TENSOR_VIEW_TYPES: {  /* the directives of view ops */
            static int (*const directives[])(Context *, PyObject *, OpState *) = {
                view_ordering, index_types, mixed_dims, tensor_view_types};
            status = directives[code - S_VIEW_ORDERING](x, step, state);
            break;
        }
        case S_INT: {  /* (attribute slot, lowest, highest) */
            PyObject *value;
            status = read_int(x, &value);
            if (status != 1)
                break;
            int low = PyObject_RichCompareBool(PyTuple_GET_ITEM(step, 2), value, Py_LE);
            int high = PyObject_RichCompareBool(value, PyTuple_GET_ITEM(step, 3), Py_LE);
            status = low < 0 || high < 0 ? -1 : low && high;
            if (status == 1)
                Py_XSETREF(state->attrs[PyLong_AsLong(PyTuple_GET_ITEM(step, 1))], value);
            else
                Py_DECREF(value);
            break;
        }
        case S_OPTIONAL: {
            long test = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
            Py_ssize_t length = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, 3));
            long unit = PyLong_AsLong(PyTuple_GET_ITEM(step, 4));
            token = tilebc_cursor_peek(x->c);
            if (token == NULL)
                return -1;
            int present = -1;
            PyObject *argument = PyTuple_GET_ITEM(step, 2);
            if (test == T_SETTLED) {  /* (operand slot, test, argument) */
                PyObject *group = state->operands[PyLong_AsLong(PyTuple_GET_ITEM(argument, 0))];
                if (group != NULL)
                    present = PyTuple_CheckExact(group) ? PyTuple_GET_SIZE(group) > 0
                                                        : group != Py_None;
                test = PyLong_AsLong(PyTuple_GET_ITEM(argument, 1));
                argument = PyTuple_GET_ITEM(argument, 2);
            }
            if (present >= 0)
                ;
            else if (test == T_LITERAL)
                present = PyUnicode_Compare(TOKEN(token)->text, argument) == 0;
            else if (test == T_VALUE)
                present = kind_is(token, "value");
            else if (test == T_KEYWORD)
                present = PyDict_Contains(argument, TOKEN(token)->text);
            Py_DECREF(token);
            if (present < 0 || PyErr_Occurred())
                return -1;
            if (present && length < 0)
                return 0;  /* a group of elements read only by the generated function */
            if (present) {
                if (unit >= 0)
                    Py_XSETREF(state->attrs[unit], Py_NewRef(Py_True));
                status = run_steps(x, steps, index, length, state);
            }
            index += length < 0 ? 0 : length;
            break;
        }
        default:
            status = 0;
        }
        if (status != 1)
            return status;
    }
    return 1;
}

/* ---- ops and values made as their constructors make them -------------------------------------
 * ParsedOp(spec, operands, attrs, types) and Value(type, op, i) set nothing but their slots; the
 * objects are made here with those slots set directly (a Python __init__ per op and per result
 * was a fifth of the loop). The layout is read from the classes' slot descriptors; a class that
 * is not laid out so (a slot gone, renamed or not an object slot) is called instead. */

enum { OP_SPEC, OP_OPERANDS, OP_ATTRS, OP_RESULTS, OP_REGIONS, OP_LOC, OP_OFFSET, OP_TEXT_POS,
       OP_GENERIC_FORM, OP_SLOTS };
enum { VALUE_TYPE, VALUE_OWNER, VALUE_INDEX, VALUE_SLOTS };
static const char *op_slot_names[OP_SLOTS] = {"spec", "operands", "attrs", "results", "regions",
                                              "loc", "offset", "text_pos", "generic_form"};
static const char *value_slot_names[VALUE_SLOTS] = {"type", "_owner", "index"};

typedef struct {
    PyTypeObject *op_class, *value_class;  /* strong references while cached */
    Py_ssize_t op[OP_SLOTS], value[VALUE_SLOTS];
    int op_usable, value_usable;
} Layout;

static Layout layout;

static int slot_offsets(PyTypeObject *type, const char **names, int count, Py_ssize_t *out) {
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) || type->tp_alloc == NULL
            || type->tp_dictoffset != 0)
        return 0;
    for (int i = 0; i < count; i++) {
        PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descriptor == NULL) {
            PyErr_Clear();
            return 0;
        }
        int usable = Py_IS_TYPE(descriptor, &PyMemberDescr_Type);
        if (usable) {
            PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
            usable = (member->type == T_OBJECT_EX || member->type == T_OBJECT)
                && !(member->flags & READONLY) && member->offset > 0
                && (size_t)member->offset + sizeof(PyObject *) <= (size_t)type->tp_basicsize;
            out[i] = member->offset;
        }
        Py_DECREF(descriptor);
        if (!usable)
            return 0;
    }
    return 1;
}

/* Whether values of `value_class` can be made here. */
static int value_layout_for(PyTypeObject *value_class) {
    if (layout.value_class != value_class) {
        Py_XSETREF(layout.value_class, (PyTypeObject *)Py_NewRef(value_class));
        layout.value_usable = slot_offsets(value_class, value_slot_names, VALUE_SLOTS,
                                           layout.value);
    }
    return layout.value_usable;
}

/* Whether ops of `op_class` and their values of `value_class` can be made here. */
static int layout_for(PyTypeObject *op_class, PyTypeObject *value_class) {
    if (layout.op_class != op_class) {
        Py_XSETREF(layout.op_class, (PyTypeObject *)Py_NewRef(op_class));
        layout.op_usable = slot_offsets(op_class, op_slot_names, OP_SLOTS, layout.op);
    }
    return layout.op_usable && value_layout_for(value_class);
}

#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* Value(type, owner, index): an op's result or a block's argument, its owner held weakly, made
 * as the constructor makes it; NULL with an exception. */
static PyObject *make_value(PyTypeObject *value_class, PyObject *type, PyObject *owner_object,
                            Py_ssize_t index) {
    if (!value_layout_for(value_class)) {
        PyObject *position = PyLong_FromSsize_t(index);
        if (position == NULL)
            return NULL;
        PyObject *args[3] = {type, owner_object, position};
        PyObject *value = PyObject_Vectorcall((PyObject *)value_class, args, 3, NULL);
        Py_DECREF(position);
        return value;
    }
    PyObject *value = value_class->tp_alloc(value_class, 0);
    PyObject *owner = value == NULL ? NULL : PyWeakref_NewRef(owner_object, NULL);
    PyObject *position = owner == NULL ? NULL : PyLong_FromSsize_t(index);
    if (position == NULL) {
        Py_XDECREF(owner);
        Py_XDECREF(value);
        return NULL;
    }
    SLOT(value, layout.value[VALUE_TYPE]) = Py_NewRef(type);
    SLOT(value, layout.value[VALUE_OWNER]) = owner;
    SLOT(value, layout.value[VALUE_INDEX]) = position;
    return value;
}

/* ParsedOp(spec, operands, attrs, types) (a new reference; NULL with an exception). */
static PyObject *make_op(PyObject *op_class, PyTypeObject *value_class, PyObject *spec,
                         PyObject *operands, PyObject *attrs, PyObject *types) {
    if (!PyType_Check(op_class) || !layout_for((PyTypeObject *)op_class, value_class)) {
        PyObject *args[4] = {spec, operands, attrs, types};
        return PyObject_Vectorcall(op_class, args, 4, NULL);
    }
    PyTypeObject *type = (PyTypeObject *)op_class;
    PyObject *op = type->tp_alloc(type, 0);
    if (op == NULL)
        return NULL;
    PyObject *results = PyList_New(PyList_GET_SIZE(types));
    PyObject *regions = PyTuple_New(0);
    if (results == NULL || regions == NULL) {
        Py_XDECREF(results);
        Py_XDECREF(regions);
        Py_DECREF(op);
        return NULL;
    }
    SLOT(op, layout.op[OP_SPEC]) = Py_NewRef(spec);
    SLOT(op, layout.op[OP_OPERANDS]) = Py_NewRef(operands);
    SLOT(op, layout.op[OP_ATTRS]) = Py_NewRef(attrs);
    SLOT(op, layout.op[OP_RESULTS]) = results;
    SLOT(op, layout.op[OP_REGIONS]) = regions;
    SLOT(op, layout.op[OP_LOC]) = Py_NewRef(Py_None);
    SLOT(op, layout.op[OP_OFFSET]) = Py_NewRef(Py_None);
    SLOT(op, layout.op[OP_TEXT_POS]) = Py_NewRef(Py_None);
    SLOT(op, layout.op[OP_GENERIC_FORM]) = Py_NewRef(Py_False);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(types); i++) {
        PyObject *value = make_value(value_class, PyList_GET_ITEM(types, i), op, i);
        if (value == NULL) {
            Py_DECREF(op);
            return NULL;
        }
        PyList_SET_ITEM(results, i, value);
    }
    return op;
}

/* The type of the Value `value` (new reference), NULL with an exception. */
static PyObject *type_of(PyObject *value) {
    return PyObject_GetAttr(value, s_type);
}

/* Whether the operand in `slot` is a Value of a type other than `wanted` (1), -1 on error. */
static int other_type(Context *x, OpState *state, long slot, PyObject *wanted) {
    PyObject *value = state->operands[slot];
    if (value == NULL || Py_TYPE(value) != x->value_class)
        return 0;
    PyObject *type = type_of(value);
    if (type == NULL)
        return -1;
    int other = type != wanted;
    Py_DECREF(type);
    return other;
}

/* The op _build makes of what was read (new reference); NULL and *status 0 where the Python
 * parser must decide, NULL and *status -1 on error. */
static PyObject *build(Context *x, PyObject *program, OpState *state, Py_ssize_t names,
                       int *status) {
    PyObject *spec = PyTuple_GET_ITEM(program, 0);
    PyObject *operand_steps = PyTuple_GET_ITEM(program, 2);
    PyObject *attr_steps = PyTuple_GET_ITEM(program, 3);
    PyObject *result_steps = PyTuple_GET_ITEM(program, 4);
    PyObject *swaps = PyTuple_GET_ITEM(program, 5);
    long result_like = PyLong_AsLong(PyTuple_GET_ITEM(program, 6));
    long token_slot = PyLong_AsLong(PyTuple_GET_ITEM(program, 7));
    PyObject *operands = NULL, *attrs = NULL, *types = NULL, *op = NULL, *written = NULL;
    *status = -1;
    /* the checks of types the text leaves implied (identity: an equal type read from another
     * text, or any doubt, is the Python parser's to judge) */
    PyObject *result = state->results[0];
    int other;
    if (swaps != Py_None && state->operands[PyLong_AsLong(PyTuple_GET_ITEM(swaps, 0))] != NULL
            && state->operands[PyLong_AsLong(PyTuple_GET_ITEM(swaps, 1))] == NULL)
        goto unusual;  /* `%p, %x`: a mask or a padding value, told apart by _build */
    if (token_slot >= 0 && (other = other_type(x, state, token_slot, x->token_type)) != 0)
        goto unusual;
    if (PyTuple_GET_ITEM(program, 8) == Py_True && result != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(operand_steps); i++)
            if (!(state->written & (1u << i)) && (other = other_type(x, state, i, result)) != 0)
                goto unusual;
    }
    PyObject *matched = PyTuple_GET_ITEM(program, 9);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(matched) && written == NULL; i++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(matched, i));
        if (state->written & (1u << slot)) {
            PyObject *group = state->operands[slot];
            if (Py_TYPE(group) != x->value_class)
                goto unusual;
            written = type_of(group);
            if (written == NULL)
                goto error;
        }
    }
    if (written == NULL && PyTuple_GET_ITEM(program, 10) == Py_True && result != NULL)
        written = Py_NewRef(result);
    if (written != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(matched); i++) {
            long slot = PyLong_AsLong(PyTuple_GET_ITEM(matched, i));
            if (!(state->written & (1u << slot))
                    && (other = other_type(x, state, slot, written)) != 0)
                goto unusual;
        }
    }
    operands = PyDict_New();
    if (operands == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(operand_steps); i++) {
        PyObject *step = PyTuple_GET_ITEM(operand_steps, i);
        long arity = PyLong_AsLong(PyTuple_GET_ITEM(step, 1));
        PyObject *value = state->operands[i];
        if (value == NULL) {
            if (arity == R_ONE)
                goto unusual;
            value = arity == R_VARIADIC ? PyTuple_New(0) : Py_NewRef(Py_None);
        } else {
            Py_INCREF(value);
        }
        if (value == NULL || PyDict_SetItem(operands, PyTuple_GET_ITEM(step, 0), value) < 0) {
            Py_XDECREF(value);
            goto error;
        }
        Py_DECREF(value);
    }
    attrs = PyDict_New();
    if (attrs == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(attr_steps); i++) {
        PyObject *step = PyTuple_GET_ITEM(attr_steps, i);
        PyObject *value = state->attrs[i];
        if (value != NULL) {
            Py_INCREF(value);
        } else if (PyLong_AsLong(PyTuple_GET_ITEM(step, 1)) == A_DEFAULT_FOR) {
            value = PyObject_CallMethodOneArg(PyTuple_GET_ITEM(step, 2), s_default_for, operands);
            if (value == NULL)
                goto error;
        } else {
            value = Py_NewRef(PyTuple_GET_ITEM(step, 2));
        }
        if (value == Py_None && PyLong_AsLong(PyTuple_GET_ITEM(step, 1)) != A_ABSENT) {
            Py_DECREF(value);
            goto unusual;  /* a required attribute missing: the Python parser's error */
        }
        int failed = PyDict_SetItem(attrs, PyTuple_GET_ITEM(step, 0), value) < 0;
        Py_DECREF(value);
        if (failed)
            goto error;
    }
    /* result types: written, a token, the type of the operand the kind names, else the first */
    types = PyList_New(0);
    if (types == NULL)
        goto error;
    PyObject *first = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(result_steps); i++) {
        PyObject *type = state->results[i];
        if (type != NULL) {
            Py_INCREF(type);
        } else if (PyTuple_GET_ITEM(result_steps, i) == Py_True) {
            type = Py_NewRef(x->token_type);
        } else if (i == 0 && result_like >= 0) {
            PyObject *source = state->operands[result_like];
            if (source == NULL || Py_TYPE(source) != x->value_class)
                goto unusual;
            type = type_of(source);
            if (type == NULL)
                goto error;
        } else if (first != NULL) {
            type = Py_NewRef(first);
        } else {
            goto unusual;
        }
        int failed = PyList_Append(types, type) < 0;
        Py_DECREF(type);
        if (failed)
            goto error;
        if (first == NULL)
            first = PyList_GET_ITEM(types, i);
    }
    if (names > 0 && PyList_GET_SIZE(types) != names)
        goto unusual;  /* as many names as results, or the Python parser's error */
    op = make_op(PyTuple_GET_ITEM(program, 11), x->value_class, spec, operands, attrs, types);
    *status = op == NULL ? -1 : 1;
    goto done;
unusual:
    if (PyErr_Occurred())
        goto error;
    *status = 0;
    goto done;
error:
    *status = -1;
done:
    Py_XDECREF(operands);
    Py_XDECREF(attrs);
    Py_XDECREF(types);
    Py_XDECREF(written);
    return op;
}

/* (line, column) of `pos`, as Cursor.line_col gives it (new reference). The ops of a region
 * come in order: the search starts from the line the last op was on. */
static PyObject *line_col(Context *x, Py_ssize_t pos) {
    PyObject *newlines = PyObject_GetAttr((PyObject *)x->c, s_newlines);
    if (newlines == NULL)
        return NULL;
    if (!PyList_CheckExact(newlines)) {
        Py_DECREF(newlines);
        return PyObject_CallMethod((PyObject *)x->c, "line_col", "n", pos);
    }
    /* line = the number of newlines before `pos` (bisect_left): a few steps on from the last
     * op's line, else a binary search */
    Py_ssize_t count = PyList_GET_SIZE(newlines), line = x->line_hint, steps = 0;
    if (line < 0 || line > count
            || (line > 0 && PyLong_AsSsize_t(PyList_GET_ITEM(newlines, line - 1)) >= pos))
        line = -1;
    while (line >= 0 && line < count
           && PyLong_AsSsize_t(PyList_GET_ITEM(newlines, line)) < pos)
        line = ++steps > 8 ? -1 : line + 1;
    if (line < 0) {
        Py_ssize_t low = 0, high = count;
        while (low < high) {
            Py_ssize_t middle = low + (high - low) / 2;
            if (PyLong_AsSsize_t(PyList_GET_ITEM(newlines, middle)) < pos)
                low = middle + 1;
            else
                high = middle;
        }
        line = low;
    }
    Py_ssize_t start = line > 0 ? PyLong_AsSsize_t(PyList_GET_ITEM(newlines, line - 1)) + 1 : 0;
    Py_DECREF(newlines);
    if (PyErr_Occurred())
        return NULL;
    x->line_hint = line;
    return Py_BuildValue("(nn)", line + 1, pos - start + 1);
}

/* One op read here and appended to `ops`: 1; 0 where parser._next_op() must read it (the
 * cursor back at its start); -1 on error. */
static int fast_op(Context *x, PyObject *ops) {
    PyObject *names[MAX_NAMES];
    Py_ssize_t name_count = 0, start = -1;
    OpState state;
    memset(&state, 0, sizeof(state));
    PyObject *token = NULL, *op = NULL, *program = NULL;
    int status = 0;
    /* held: the Python calls below (types, predicates, defaults, loc) must not free it */
    PyObject *scope = PyList_GET_SIZE(x->scopes) > 0
        ? PyList_GET_ITEM(x->scopes, PyList_GET_SIZE(x->scopes) - 1) : NULL;
    if (scope == NULL || !PyDict_CheckExact(scope))
        return 0;
    Py_INCREF(scope);
    /* result names: `%a, %b =` (a group's `%a:2` is the Python parser's) */
    token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        goto error;
    start = TOKEN(token)->pos;
    while (kind_is(token, "value")) {
        if (name_count == MAX_NAMES)
            goto done;
        int taken = PyDict_Contains(scope, TOKEN(token)->text);
        for (Py_ssize_t i = 0; i < name_count && taken == 0; i++)
            taken = PyUnicode_Compare(TOKEN(names[i])->text, TOKEN(token)->text) == 0;
        if (taken < 0)
            goto error;
        if (taken != 0)
            goto done;  /* a name in use: the Python parser's error */
        tilebc_cursor_advance(x->c, token);
        names[name_count++] = token;
        token = tilebc_cursor_peek(x->c);
        if (token == NULL)
            goto error;
        if (!text_is(token, ","))
            break;
        tilebc_cursor_advance(x->c, token);
        Py_DECREF(token);
        token = tilebc_cursor_peek(x->c);
        if (token == NULL)
            goto error;
        if (!kind_is(token, "value"))
            goto done;  /* a comma not followed by a name: the Python parser's error */
    }
    if (name_count > 0) {
        if (!text_is(token, "="))
            goto done;
        tilebc_cursor_advance(x->c, token);
        Py_DECREF(token);
        token = tilebc_cursor_peek(x->c);
        if (token == NULL)
            goto error;
    }
    if (!kind_is(token, "ident"))
        goto done;
    program = PyDict_GetItemWithError(x->programs, TOKEN(token)->text);
    if (program == NULL) {
        if (PyErr_Occurred())
            goto error;
        program = PyObject_CallMethodOneArg(x->parser, s_fast_program, TOKEN(token)->text);
        if (program == NULL)
            goto error;
    } else {
        Py_INCREF(program);
    }
    if (program == Py_None)
        goto done;
    if (!PyTuple_CheckExact(program) || PyTuple_GET_SIZE(program) != 12) {
        PyErr_SetString(PyExc_TypeError, "parse_ops: a program is not the 12-tuple "
                        "fast_program makes");
        goto error;
    }
    tilebc_cursor_advance(x->c, token);
    Py_CLEAR(token);
    status = run_steps(x, PyTuple_GET_ITEM(program, 1), 0,
                       PyTuple_GET_SIZE(PyTuple_GET_ITEM(program, 1)), &state);
    if (status != 1)
        goto done;
    op = build(x, program, &state, name_count, &status);
    if (status != 1)
        goto done;
    /* placed: line:col, a trailing loc(...), then its results named */
    PyObject *where = line_col(x, start);
    if (where == NULL || PyObject_SetAttr(op, s_text_pos, where) < 0) {
        Py_XDECREF(where);
        goto error;
    }
    Py_DECREF(where);
    token = tilebc_cursor_peek(x->c);
    if (token == NULL)
        goto error;
    if (text_is(token, "loc")) {
        PyObject *expr = PyObject_CallMethodOneArg(x->parser, s_loc, op);
        if (expr == NULL)
            goto error;
        Py_DECREF(expr);
    }
    PyObject *results = PyObject_GetAttr(op, s_results);
    if (results == NULL)
        goto error;
    int failed = !PyList_CheckExact(results) || PyList_GET_SIZE(results) < name_count;
    for (Py_ssize_t i = 0; i < name_count && !failed; i++) {
        PyObject *value = PyList_GET_ITEM(results, i);
        PyObject *pos = PyLong_FromSsize_t(TOKEN(names[i])->pos);
        failed = pos == NULL || PyDict_SetItem(scope, TOKEN(names[i])->text, value) < 0
            || PyDict_SetItem(x->defined_at, value, pos) < 0;
        Py_XDECREF(pos);
    }
    Py_DECREF(results);
    if (failed) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "parse_ops: an op's results do not match its "
                            "names");
        goto error;
    }
    status = PyList_Append(ops, op) < 0 ? -1 : 1;
    goto done;
error:
    status = -1;
done:
    Py_XDECREF(token);
    Py_XDECREF(op);
    Py_XDECREF(program);
    for (Py_ssize_t i = 0; i < name_count; i++)
        Py_DECREF(names[i]);
    state_clear(&state);
    Py_DECREF(scope);
    return status;
}

static int read_context(PyObject *parser, Context *x) {
    x->parser = parser;
    x->scopes = NULL;
    x->line_hint = -1;
    PyObject *tuple = PyObject_GetAttr(parser, s_fast_context);
    if (tuple == NULL)
        return -1;
    int ok = PyTuple_CheckExact(tuple) && PyTuple_GET_SIZE(tuple) == 8;
    if (ok) {
        PyObject **items = &PyTuple_GET_ITEM(tuple, 0);
        ok = tilebc_is_cursor(items[0]) && PyDict_CheckExact(items[1])
            && PyDict_CheckExact(items[2]) && PyDict_CheckExact(items[3])
            && PyDict_CheckExact(items[4]) && PyType_Check(items[5]);
        if (ok) {
            x->c = (CursorObject *)items[0];
            x->defined_at = items[1];
            x->known = items[2];
            x->shared = items[3];
            x->programs = items[4];
            x->value_class = (PyTypeObject *)items[5];
            x->token_type = items[6];
            x->types = items[7];
        }
    }
    Py_DECREF(tuple);  /* the parser holds the tuple while this call runs */
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "parse_ops: parser._fast_context is not the (cursor, "
                        "defined_at, known_types, shared_values, programs, Value, token type, "
                        "type parser) tuple");
    return ok ? 0 : -1;
}

static PyObject *parse_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "parse_ops(parser, ops: list) takes 2 arguments");
        return NULL;
    }
    Context x;
    if (read_context(args[0], &x) < 0)
        return NULL;
    x.scopes = PyObject_GetAttr(x.parser, s_scopes);
    if (x.scopes == NULL)
        return NULL;
    PyObject *result = NULL;
    if (!PyList_CheckExact(x.scopes)) {
        PyErr_SetString(PyExc_TypeError, "parse_ops: parser.scopes must be a list");
        goto done;
    }
    if (x.c->text == NULL || !PyUnicode_Check(x.c->text)) {
        PyErr_SetString(PyExc_TypeError, "parse_ops: the cursor's text must be a str");
        goto done;
    }
#if PY_VERSION_HEX < 0x030C0000 /* strings are always ready from 3.12 on */
    if (PyUnicode_READY(x.c->text) < 0)
        goto done;
#endif
    for (Py_ssize_t read = 1;; read++) {
        /* a long region is one call: let Ctrl-C in as the interpreter's own loop would */
        if (read % 4096 == 0 && PyErr_CheckSignals() < 0)
            goto done;
        PyObject *token = tilebc_cursor_peek(x.c);
        if (token == NULL)
            goto done;
        if (text_is(token, "}")) {
            tilebc_cursor_advance(x.c, token);
            Py_DECREF(token);
            break;
        }
        Py_DECREF(token);
        Py_ssize_t pos = x.c->pos, end = x.c->end;
        PyObject *peeked = Py_XNewRef(x.c->peeked);
        int status = fast_op(&x, args[1]);
        if (status == 0) {  /* back to the op's start: the Python parser reads it */
            x.c->pos = pos;
            x.c->end = end;
            Py_XSETREF(x.c->peeked, peeked);
            peeked = NULL;
            PyObject *op = PyObject_CallMethodNoArgs(x.parser, s_next_op);
            if (op == NULL)
                goto done;
            status = PyList_Append(args[1], op);
            Py_DECREF(op);
        }
        Py_XDECREF(peeked);
        if (status < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(x.scopes);
    return result;
}

/* parse_args(parser, block, args, scope, arg_attrs, no_attrs): an entry's arguments `%name :
 * type` (after the first, each after a comma) for as long as each is a new name of a type read
 * before, with neither attributes nor a location after it: each made, appended to `args` (the
 * block's) and named in `scope`, `no_attrs` appended to `arg_attrs`. Stops where the next is
 * anything else (the cursor before its comma) and returns how many it read; _Parser._entry
 * reads the rest. */
static PyObject *parse_args(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_CheckExact(args[2]) || !PyDict_CheckExact(args[3])
            || !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "parse_args(parser, block, args: list, scope: dict, "
                        "arg_attrs: list, no_attrs)");
        return NULL;
    }
    Context x;
    if (read_context(args[0], &x) < 0)
        return NULL;
    PyObject *block = args[1], *list = args[2], *scope = args[3];
    Py_ssize_t read = 0;
    for (;;) {
        Py_ssize_t pos = x.c->pos, end = x.c->end;
        PyObject *peeked = Py_XNewRef(x.c->peeked);
        PyObject *token = NULL, *name = NULL, *type = NULL, *value = NULL;
        Py_ssize_t name_pos = 0, start;
        int status = 0;  /* 1 read, 0 stop here, -1 error */
        if (PyList_GET_SIZE(list) > 0) {
            token = tilebc_cursor_peek(x.c);
            if (token == NULL || !text_is(token, ","))
                goto next;
            tilebc_cursor_advance(x.c, token);
            Py_CLEAR(token);
        }
        token = tilebc_cursor_peek(x.c);
        if (token == NULL || !kind_is(token, "value"))
            goto next;
        int taken = PyDict_Contains(scope, TOKEN(token)->text);
        if (taken != 0) {
            status = taken < 0 ? -1 : 0;
            goto next;
        }
        name = Py_NewRef(TOKEN(token)->text);
        name_pos = TOKEN(token)->pos;
        tilebc_cursor_advance(x.c, token);
        Py_CLEAR(token);
        token = tilebc_cursor_peek(x.c);
        if (token == NULL || !text_is(token, ":"))
            goto next;
        tilebc_cursor_advance(x.c, token);
        Py_CLEAR(token);
        status = read_type(&x, &type, &start);
        if (status != 1)
            goto next;
        status = 0;
        token = tilebc_cursor_peek(x.c);
        if (token == NULL || text_is(token, "{") || text_is(token, "loc"))
            goto next;
        value = make_value(x.value_class, type, block, PyList_GET_SIZE(list));
        if (value == NULL) {
            status = -1;
            goto next;
        }
        PyObject *where = PyLong_FromSsize_t(name_pos);
        status = where == NULL || PyDict_SetItem(scope, name, value) < 0
            || PyDict_SetItem(x.defined_at, value, where) < 0 || PyList_Append(list, value) < 0
            || PyList_Append(args[4], args[5]) < 0 ? -1 : 1;
        Py_XDECREF(where);
    next:
        if (token == NULL && status == 0 && PyErr_Occurred())
            status = -1;
        Py_XDECREF(token);
        Py_XDECREF(name);
        Py_XDECREF(type);
        Py_XDECREF(value);
        if (status == 0) {  /* back before this argument: the Python parser reads it */
            x.c->pos = pos;
            x.c->end = end;
            Py_XSETREF(x.c->peeked, peeked);
            peeked = NULL;
        }
        Py_XDECREF(peeked);
        if (status < 0)
            return NULL;
        if (status == 0)
            return PyLong_FromSsize_t(read);
        read++;
    }
}

static PyMethodDef parser_functions[] = {
    {"parse_args", (PyCFunction)(void (*)(void))parse_args, METH_FASTCALL,
     "parse_args(parser, block, args, scope, arg_attrs, no_attrs): the usual arguments of an "
     "entry read here; how many"},
    {"parse_ops", (PyCFunction)(void (*)(void))parse_ops, METH_FASTCALL,
     "parse_ops(parser, ops): _Parser._block_ops's loop after the region's `{`, the usual ops "
     "read here, the rest by parser._next_op()"},
    {NULL, NULL, 0, NULL},
};

int add_op_parser(PyObject *module) {
    static PyObject **names[] = {&s_fast_context, &s_scopes, &s_next_op, &s_fast_program, &s_loc,
                                 &s_line_col, &s_newlines, &s_type, &s_text_pos, &s_default_for,
                                 &s_results, &s_shape, &s_strides, &s_predicate,
                                 &s_dense_constant};
    static const char *texts[] = {"_fast_context", "scopes", "_next_op", "_fast_program", "_loc",
                                  "line_col", "_newlines", "type", "text_pos", "default_for",
                                  "results", "shape", "strides", "_predicate",
                                  "_dense_constant"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL)
            return -1;
    }
    return PyModule_AddFunctions(module, parser_functions);
}
