/* The verifier's loop over a block's ops, in C (part of tilebc._speedups; the Python twin is
 * Verifier.block's loop in tilebc/verify/structure.py, and tests/test_speedups.py compares them).
 *
 * verify_ops(verifier, ops, plain, clean, one_op, dense_class, value_class)
 *
 * `plain` maps id(spec) to the compiled fast check (tilebc/verify/signature.py) of op kinds whose
 * check reads nothing but the op itself and where it stands: no regions, context checks, symbol
 * or terminator (optimization hints are checked by their value alone). For an op of such a kind the loop builds a key from what the check's
 * verdict depends on (the kind, each operand group's shape and types, each attribute by identity,
 * dense values by their type, integer arrays by value, the result types), as bytes. Once an op of
 * that key went through the check without a single diagnostic, a later one with the same key
 * needs only what depends on where it stands: its operands in scope, its location resolved to the
 * entry's subprogram without a problem, no regions, each result new; it gets those here. Any doubt
 * (a miss, an operand out of scope, a location to look at, a shape the key does not cover) calls
 * the check itself, so every message and its order are those of the Python loop. Ops of other
 * kinds go to one_op(op, last).
 *
 * Keys hold addresses of objects the module keeps alive while it is verified (types, attributes,
 * operand names), as the Python fast path's keys hold their ids.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_speedups.h"

static PyObject *s_spec, *s_operands, *s_attrs, *s_results, *s_regions, *s_loc, *s_type,
    *s_visible, *s_defined, *s_entry_subprogram, *s_debug, *s_resolved, *s_resolve, *s_ctx,
    *s_diagnostics, *s_scopes, *s_scope, *s_line, *s_column;
/* the slots the loop reads per op and per value (tilebc_slot), one cache per name; an op's
 * fields as its slots hold them (compact or a dict) */
static TilebcSlotCache slot_type, slot_loc, slot_results, slot_regions, slot_spec;
static TilebcSlotCache slot_operands = TILEBC_RAW_SLOT, slot_attrs = TILEBC_RAW_SLOT;

#define KEY_SLOTS 128  /* an op needing more key words is checked every time */

enum { K_NONE = 1, K_ONE, K_MANY, K_DENSE, K_OTHER, K_ARRAY, K_INT, K_BOOL, K_RESULTS };

typedef struct {
    uint64_t words[KEY_SLOTS];
    Py_ssize_t used;
} Key;

/* The key's words mixed into 64 bits: `clean` is keyed by this number (an int), the key's
 * bytes kept as the value and compared on a hit (two keys of one number: the later one is
 * checked every time). */
static uint64_t key_hash(const Key *key) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)key->used;
    for (Py_ssize_t i = 0; i < key->used; i++) {
        h ^= key->words[i];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return h;
}

static int put(Key *key, uint64_t word) {
    if (key->used == KEY_SLOTS)
        return 0;
    key->words[key->used++] = word;
    return 1;
}

#define PTR(p) ((uint64_t)(uintptr_t)(p))

/* The address of `value`'s type: 1; 0 when `value` is not exactly a Value or the key is full;
 * -1 on error. */
static int put_type(Key *key, PyObject *value, PyTypeObject *value_class) {
    if (Py_TYPE(value) != value_class)
        return 0;
    PyObject *type = tilebc_slot(value, s_type, &slot_type);
    if (type == NULL)
        return -1;
    Py_DECREF(type);  /* the value holds it */
    return put(key, PTR(type));
}

/* The count of `values`, then each one's type (put_type); the same answers. */
static int put_items(Key *key, PyObject *const *values, Py_ssize_t count,
                     PyTypeObject *value_class) {
    if (!put(key, (uint64_t)count))
        return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int status = put_type(key, values[i], value_class);
        if (status <= 0)
            return status;
    }
    return 1;
}

/* put_items of a tuple */
static int put_types(Key *key, PyObject *values, PyTypeObject *value_class) {
    return put_items(key, &PyTuple_GET_ITEM(values, 0), PyTuple_GET_SIZE(values), value_class);
}

/* 1: the key is built; 0: the op is not shaped for a key (check it every time); -1: error. The
 * ids taken are of objects the op holds; no Python code runs while they are read. */
static int build_key(Key *key, PyObject *spec, PyObject *operands, PyObject *attrs,
                     PyObject *const *results, Py_ssize_t n_results, PyTypeObject *value_class,
                     PyTypeObject *dense_class) {
    key->used = 0;
    if (!tilebc_is_fields(operands) || !tilebc_is_fields(attrs))
        return 0;
    if (!put(key, PTR(spec)) || !put(key, (uint64_t)tilebc_fields_size(operands)))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *name, *group;
    while (tilebc_fields_next(operands, &pos, &name, &group)) {
        if (!put(key, PTR(name)))
            return 0;
        int status;
        if (group == Py_None)
            status = put(key, K_NONE);
        else if (PyTuple_CheckExact(group))
            status = put(key, K_MANY) ? put_types(key, group, value_class) : 0;
        else
            status = put(key, K_ONE) ? put_type(key, group, value_class) : 0;
        if (status <= 0)
            return status;
    }
    if (!put(key, (uint64_t)tilebc_fields_size(attrs)))
        return 0;
    pos = 0;
    PyObject *value;
    while (tilebc_fields_next(attrs, &pos, &name, &value)) {
        if (!put(key, PTR(name)))
            return 0;
        if (Py_TYPE(value) == dense_class) {
            /* no check reads a constant's bytes (the reader checked their length) */
            PyObject *type = tilebc_slot(value, s_type, &slot_type);
            if (type == NULL)
                return -1;
            Py_DECREF(type);
            if (!put(key, K_DENSE) || !put(key, PTR(type)))
                return 0;
        } else if (PyTuple_CheckExact(value)) {
            /* each op has its own array: by value, each item's class with it (True == 1) */
            Py_ssize_t count = PyTuple_GET_SIZE(value);
            if (!put(key, K_ARRAY) || !put(key, (uint64_t)count))
                return 0;
            for (Py_ssize_t i = 0; i < count; i++) {
                PyObject *item = PyTuple_GET_ITEM(value, i);
                if (PyBool_Check(item)) {
                    if (!put(key, K_BOOL) || !put(key, item == Py_True))
                        return 0;
                } else if (PyLong_CheckExact(item)) {
                    int overflow = 0;
                    long long number = PyLong_AsLongLongAndOverflow(item, &overflow);
                    if (overflow)
                        return 0;
                    if (number == -1 && PyErr_Occurred())
                        return -1;
                    if (!put(key, K_INT) || !put(key, (uint64_t)number))
                        return 0;
                } else {
                    return 0;
                }
            }
        } else if (!put(key, K_OTHER) || !put(key, PTR(value))) {
            return 0;
        }
    }
    return put(key, K_RESULTS) ? put_items(key, results, n_results, value_class) : 0;
}

/* What the loop reads of the verifier, again after every call into Python. */
typedef struct {
    PyObject *visible, *defined, *entry_subprogram, *resolved, *debug, *diagnostics, *scopes;
    PyObject *di_loc;   /* the DILoc class: its locations are resolved here when they can be */
    long long line_limit;  /* debuginfo.LINE_LIMIT */
} State;

static void state_clear(State *state) {
    Py_CLEAR(state->visible);
    Py_CLEAR(state->defined);
    Py_CLEAR(state->entry_subprogram);
    Py_CLEAR(state->resolved);
    Py_CLEAR(state->debug);
    Py_CLEAR(state->diagnostics);
    Py_CLEAR(state->scopes);
}

static int state_read(State *state, PyObject *verifier) {
    state_clear(state);
    PyObject *ctx = NULL;
    if (!(state->visible = PyObject_GetAttr(verifier, s_visible))
            || !(state->defined = PyObject_GetAttr(verifier, s_defined))
            || !(state->entry_subprogram = PyObject_GetAttr(verifier, s_entry_subprogram))
            || !(state->debug = PyObject_GetAttr(verifier, s_debug))
            || !(state->resolved = PyObject_GetAttr(state->debug, s_resolved))
            || !(state->scopes = PyObject_GetAttr(state->debug, s_scopes))
            || !(ctx = PyObject_GetAttr(verifier, s_ctx))
            || !(state->diagnostics = PyObject_GetAttr(ctx, s_diagnostics))) {
        Py_XDECREF(ctx);
        return -1;
    }
    Py_DECREF(ctx);
    if (!PySet_CheckExact(state->visible) || !PySet_CheckExact(state->defined)
            || !PyDict_CheckExact(state->resolved) || !PyDict_CheckExact(state->scopes)
            || !PyList_CheckExact(state->diagnostics)) {
        PyErr_SetString(PyExc_TypeError, "verify_ops: the verifier's sets, its resolved "
                        "locations or its diagnostics are not of the expected types");
        return -1;
    }
    return 0;
}

/* Whether every operand of the op is in scope (1), not (0), or an error (-1). */
static int operands_visible(PyObject *operands, PyObject *visible) {
    Py_ssize_t pos = 0;
    PyObject *name, *group;
    while (tilebc_fields_next(operands, &pos, &name, &group)) {
        if (group == Py_None)
            continue;
        if (PyTuple_CheckExact(group)) {
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(group); i++) {
                int found = PySet_Contains(visible, PyTuple_GET_ITEM(group, i));
                if (found != 1)
                    return found;
            }
        } else {
            int found = PySet_Contains(visible, group);
            if (found != 1)
                return found;
        }
    }
    return 1;
}

/* A line or column of a location: 1 when below the limit (or negative), 0 when it is not a plain
 * int below it (resolve says what it is), -1 on error. */
static int in_range(PyObject *loc, PyObject *name, long long limit) {
    PyObject *number = PyObject_GetAttr(loc, name);
    if (number == NULL)
        return -1;
    int overflow = 0;
    long long value = PyLong_CheckExact(number) ? PyLong_AsLongLongAndOverflow(number, &overflow)
                                                : limit;
    Py_DECREF(number);
    if (value == -1 && PyErr_Occurred())
        return -1;
    return overflow < 0 || (overflow == 0 && value < limit);
}

/* DebugInfoChecker.resolve for the usual location, a DILoc whose scope is resolved already and
 * whose line and column are in range: (loc, its subprogram, the scope's problem), kept in
 * `resolved` as resolve keeps it. A new reference; NULL without an error: ask resolve. */
static PyObject *resolve_here(State *state, PyObject *loc, PyObject *id) {
    if ((PyObject *)Py_TYPE(loc) != state->di_loc)
        return NULL;
    PyObject *scope = PyObject_GetAttr(loc, s_scope);
    PyObject *entry = scope ? tilebc_by_id(state->scopes, scope) : NULL;
    PyObject *found = NULL;
    if (entry != NULL && PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 3
            && PyTuple_GET_ITEM(entry, 0) == scope) {
        PyObject *subprogram = PyTuple_GET_ITEM(entry, 1), *problem = PyTuple_GET_ITEM(entry, 2);
        Py_INCREF(subprogram);
        Py_INCREF(problem);
        int plain = problem != Py_None ? 1 : in_range(loc, s_line, state->line_limit);
        if (plain == 1 && problem == Py_None)
            plain = in_range(loc, s_column, state->line_limit);
        if (plain == 1) {
            found = PyTuple_Pack(3, loc, subprogram, problem);
            if (found != NULL && PyDict_SetItem(state->resolved, id, found) < 0)
                Py_CLEAR(found);
        }
        Py_DECREF(subprogram);
        Py_DECREF(problem);
    }
    Py_XDECREF(scope);
    return found;
}

/* Whether the op's location needs no look (1: none, or resolved to the entry's subprogram without
 * a problem), needs one (0), or an error (-1). May call debug.resolve (Python). */
static int location_plain(PyObject *op, State *state, int *ran_python) {
    if (state->entry_subprogram == Py_False)
        return 1;
    PyObject *loc = tilebc_slot(op, s_loc, &slot_loc);
    if (loc == NULL)
        return -1;
    if (loc == Py_None) {
        Py_DECREF(loc);
        return 1;
    }
    PyObject *id = PyLong_FromVoidPtr(loc);
    if (id == NULL) {
        Py_DECREF(loc);
        return -1;
    }
    PyObject *found = PyDict_GetItemWithError(state->resolved, id);
    if (found != NULL) {
        Py_INCREF(found);
    } else {
        if (PyErr_Occurred() || (found = resolve_here(state, loc, id)) == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(id);
                Py_DECREF(loc);
                return -1;
            }
            *ran_python = 1;
            found = PyObject_CallMethodOneArg(state->debug, s_resolve, loc);
            if (found == NULL) {
                Py_DECREF(id);
                Py_DECREF(loc);
                return -1;
            }
        }
    }
    Py_DECREF(id);
    Py_DECREF(loc);
    int plain = 0;
    if (PyTuple_CheckExact(found) && PyTuple_GET_SIZE(found) == 3) {
        PyObject *subprogram = PyTuple_GET_ITEM(found, 1);
        plain = PyTuple_GET_ITEM(found, 2) == Py_None
                && (subprogram == Py_None || subprogram == state->entry_subprogram);
    }
    Py_DECREF(found);
    return plain;
}

/* Whether each result is new (1), some was defined before or is listed twice (0: the check says
 * which is a redefinition), or an error (-1). */
static int results_new(PyObject *const *results, Py_ssize_t count, PyObject *defined) {
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *result = results[i];
        for (Py_ssize_t j = 0; j < i; j++)
            if (results[j] == result)
                return 0;
        int found = PySet_Contains(defined, result);
        if (found != 0)
            return found < 0 ? -1 : 0;
    }
    return 1;
}

static int define_results(PyObject *const *results, Py_ssize_t count, State *state) {
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *result = results[i];
        if (PySet_Add(state->defined, result) < 0 || PySet_Add(state->visible, result) < 0)
            return -1;
    }
    return 0;
}

/* One op of a plain kind: 0 when done, -1 on error. `state` is read again after a call. */
static int plain_op(PyObject *verifier, PyObject *op, PyObject *spec, PyObject *check,
                    PyObject *clean, State *state, PyTypeObject *value_class,
                    PyTypeObject *dense_class) {
    PyObject *operands = NULL, *attrs = NULL, *results = NULL, *results_list = NULL,
        *regions = NULL, *key_number = NULL;
    int status = -1, handled = 0;
    Key key;
    if (!(operands = tilebc_slot(op, s_operands, &slot_operands)) || !(attrs = tilebc_slot(op, s_attrs, &slot_attrs))
            || !(results_list = tilebc_slot(op, s_results, &slot_results))
            || !(regions = tilebc_slot(op, s_regions, &slot_regions)))
        goto done;
    /* the list itself (no copy): read while no Python code runs (its items are Values, hashed
     * and compared by identity in the sets below), its items found again after */
    if (!(results = PySequence_Fast(results_list, "an op's results are not a sequence")))
        goto done;
    int shaped = build_key(&key, spec, operands, attrs, PySequence_Fast_ITEMS(results),
                           PySequence_Fast_GET_SIZE(results), value_class, dense_class);
    if (shaped < 0)
        goto done;
    int no_regions = PyObject_Not(regions);
    if (no_regions < 0)
        goto done;
    Py_ssize_t key_size = key.used * (Py_ssize_t)sizeof(uint64_t);
    if (shaped && no_regions) {
        key_number = PyLong_FromUnsignedLongLong(key_hash(&key));
        if (key_number == NULL)
            goto done;
        PyObject *known = PyDict_GetItemWithError(clean, key_number);
        if (known == NULL && PyErr_Occurred())
            goto done;
        if (known != NULL && !(PyBytes_CheckExact(known) && PyBytes_GET_SIZE(known) == key_size
                               && memcmp(PyBytes_AS_STRING(known), key.words, key_size) == 0))
            known = NULL;  /* another key of the number */
        if (known != NULL) {
            int ok = operands_visible(operands, state->visible), ran_python = 0;
            if (ok < 0)
                goto done;
            if (ok) {
                ok = location_plain(op, state, &ran_python);
                if (ok < 0)
                    goto done;
            }
            /* debug.resolve ran Python: what the loop reads of the verifier is read again */
            if (ran_python && state_read(state, verifier) < 0)
                goto done;
            if (ok) {
                ok = results_new(PySequence_Fast_ITEMS(results),
                                 PySequence_Fast_GET_SIZE(results), state->defined);
                if (ok < 0)
                    goto done;
            }
            if (ok) {
                if (define_results(PySequence_Fast_ITEMS(results),
                                   PySequence_Fast_GET_SIZE(results), state) < 0)
                    goto done;
                handled = 1;
            }
        }
    }
    if (!handled) {
        Py_ssize_t before = PyList_GET_SIZE(state->diagnostics);
        PyObject *outcome = PyObject_CallFunctionObjArgs(check, verifier, op, NULL);
        if (outcome == NULL)
            goto done;
        Py_DECREF(outcome);
        if (state_read(state, verifier) < 0)
            goto done;
        /* a check that found nothing clears every later op of the key but for where it stands */
        if (key_number != NULL && PyList_GET_SIZE(state->diagnostics) == before) {
            int taken = PyDict_Contains(clean, key_number);
            PyObject *key_bytes = taken != 0 ? NULL
                                  : PyBytes_FromStringAndSize((const char *)key.words, key_size);
            int failed = taken < 0 || (taken == 0 && (key_bytes == NULL
                                       || PyDict_SetItem(clean, key_number, key_bytes) < 0));
            Py_XDECREF(key_bytes);
            if (failed)
                goto done;
        }
    }
    status = 0;
done:
    Py_XDECREF(operands);
    Py_XDECREF(attrs);
    Py_XDECREF(results);
    Py_XDECREF(results_list);
    Py_XDECREF(regions);
    Py_XDECREF(key_number);
    return status;
}

#define CHECK_CACHE 16

static PyObject *verify_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "verify_ops(verifier, ops, plain, clean, one_op, "
                        "dense_class, value_class, di_loc_class, line_limit) takes 9 arguments");
        return NULL;
    }
    PyObject *verifier = args[0], *plain = args[2], *clean = args[3], *one_op = args[4];
    if (!PyDict_Check(plain) || !PyDict_Check(clean) || !PyType_Check(args[5])
            || !PyType_Check(args[6]) || !PyType_Check(args[7]) || !PyLong_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "verify_ops: plain and clean must be dicts, "
                        "dense_class, value_class and di_loc_class types, line_limit an int");
        return NULL;
    }
    long long line_limit = PyLong_AsLongLong(args[8]);
    if (line_limit == -1 && PyErr_Occurred())
        return NULL;
    PyTypeObject *dense_class = (PyTypeObject *)args[5], *value_class = (PyTypeObject *)args[6];
    PyObject *ops = PySequence_Tuple(args[1]);  /* a copy: the checks are Python code */
    if (ops == NULL)
        return NULL;
    State state = {0};
    /* the kinds met so far that have a check, and their checks, found without a dict: a block
     * has few kinds (one without a check is looked up again: op_at may compile its check);
     * strong references, dropped at the end */
    struct { PyObject *spec, *check; } kinds[CHECK_CACHE];
    int kinds_used = 0;
    state.di_loc = args[7];
    state.line_limit = line_limit;
    PyObject *result = NULL;
    if (state_read(&state, verifier) < 0)
        goto done;
    Py_ssize_t count = PyTuple_GET_SIZE(ops);
    for (Py_ssize_t position = 0; position < count; position++) {
        if (position % 4096 == 4095 && PyErr_CheckSignals() < 0)
            goto done;  /* a long block is one call: let Ctrl-C in */
        PyObject *op = PyTuple_GET_ITEM(ops, position);
        PyObject *spec = tilebc_slot(op, s_spec, &slot_spec);
        if (spec == NULL)
            goto done;
        PyObject *check = NULL;
        int cached = 0;
        for (int k = 0; k < kinds_used && !cached; k++) {
            if (kinds[k].spec == spec) {
                check = kinds[k].check;
                cached = 1;
            }
        }
        if (!cached) {
            check = tilebc_by_id(plain, spec);
            if (check == NULL && PyErr_Occurred()) {
                Py_DECREF(spec);
                goto done;
            }
            if (check != NULL && kinds_used < CHECK_CACHE) {
                kinds[kinds_used].spec = Py_NewRef(spec);
                kinds[kinds_used++].check = Py_NewRef(check);
            }
        }
        int status;
        if (check != NULL) {
            Py_INCREF(check);
            status = plain_op(verifier, op, spec, check, clean, &state, value_class, dense_class);
            Py_DECREF(check);
        } else {
            PyObject *outcome = PyObject_CallFunctionObjArgs(
                one_op, op, position == count - 1 ? Py_True : Py_False, NULL);
            status = outcome == NULL ? -1 : 0;
            Py_XDECREF(outcome);
            if (status == 0)
                status = state_read(&state, verifier);
        }
        Py_DECREF(spec);
        if (status < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < kinds_used; k++) {
        Py_DECREF(kinds[k].spec);
        Py_DECREF(kinds[k].check);
    }
    state_clear(&state);
    Py_DECREF(ops);
    return result;
}

static PyMethodDef verifier_functions[] = {
    {"verify_ops", (PyCFunction)(void (*)(void))verify_ops, METH_FASTCALL,
     "verify_ops(verifier, ops, plain, clean, one_op, dense_class, value_class, di_loc_class, "
     "line_limit): the loop of "
     "Verifier.block over a block's ops, ops of plain kinds with a known clean key checked here"},
    {NULL, NULL, 0, NULL},
};

int add_verifier(PyObject *module) {
    static PyObject **names[] = {&s_spec, &s_operands, &s_attrs, &s_results, &s_regions, &s_loc,
                                 &s_type, &s_visible, &s_defined, &s_entry_subprogram, &s_debug,
                                 &s_resolved, &s_resolve, &s_ctx, &s_diagnostics, &s_scopes,
                                 &s_scope, &s_line, &s_column};
    static const char *texts[] = {"spec", "operands", "attrs", "results", "regions", "loc",
                                  "type", "visible", "defined", "entry_subprogram", "debug",
                                  "resolved", "resolve", "ctx", "diagnostics", "scopes", "scope",
                                  "line", "column"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL)
            return -1;
    }
    return PyModule_AddFunctions(module, verifier_functions);
}
