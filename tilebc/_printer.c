/* The printer's loops over a block's ops, in C (part of tilebc._speedups; the Python twins are
 * in tilebc/text/names.py and printer.py, and tests/test_speedups.py compares them).
 *
 * number_ops: the op loop of FunctionNames._number_block. An op without suggested names gets the
 * next number (one result group), an op with one result and one fixed name gets that name made
 * unique in the scope chain; every other op (constants, `assume`, ops named after their results)
 * is named as _number_named names it, from suggest(op, names) (suggested_names). The counters are
 * held here while the loop runs (no callback reads them) and stored back at its end.
 *
 * print_ops: the op loop of _ModulePrinter.block_body, the usual ops' lines made here from their
 * compiled body printers; visit_locations: the -g printer's walk collecting location aliases.
 *
 * Every callback is Python code, so the loops walk tuple copies of the ops and results they hold.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_speedups.h"

static PyObject *s_next_value, *s_next_conflict, *s_text, *s_refs, *s_names,
    *s_parent, *s_regions, *s_results, *s_spec, *s_index, *s_suggested, *s_loc, *s_attrs,
    *s_operands, *s_value, *s_owner;

static PyObject *s_percent;

/* The slots the loops read per op and per value (tilebc_slot), one cache per name; an op's
 * fields as its slots hold them (compact or a dict: tilebc_fields_get reads both). */
static TilebcSlotCache slot_names, slot_parent, slot_index, slot_owner, slot_spec, slot_regions,
    slot_results, slot_type, slot_loc;
static TilebcSlotCache slot_attrs = TILEBC_RAW_SLOT, slot_operands = TILEBC_RAW_SLOT;

/* The FunctionNames' counters while number_ops runs. */
typedef struct {
    Py_ssize_t next_value, next_conflict;
} Counters;

static int load_counter(PyObject *owner, PyObject *name, Py_ssize_t *out) {
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    if (*out < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "number_ops: a negative counter");
        return -1;
    }
    return 0;
}

static int store_counter(PyObject *owner, PyObject *name, Py_ssize_t value) {
    PyObject *number = PyLong_FromSsize_t(value);
    int failed = number == NULL || PyObject_SetAttr(owner, name, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

/* str(number) */
static PyObject *number_text(Py_ssize_t number) {
    char buffer[32];
    int length = snprintf(buffer, sizeof buffer, "%zd", number);
    return PyUnicode_FromStringAndSize(buffer, length);
}

/* Every function numbers its values from 0: the texts of the first numbers ("N" and its use
 * "%N") are made once and shared by all functions (two strings fewer per value). */
#define SHARED_NUMBERS 4096
static PyObject *number_heads[SHARED_NUMBERS], *number_uses[SHARED_NUMBERS];

/* head = str(number), use = "%" + head (new references); -1 on error */
static int numbered(Py_ssize_t number, PyObject **head, PyObject **use) {
    if (number < SHARED_NUMBERS && number_heads[number] != NULL) {
        *head = Py_NewRef(number_heads[number]);
        *use = Py_NewRef(number_uses[number]);
        return 0;
    }
    *head = number_text(number);
    *use = *head == NULL ? NULL : PyUnicode_Concat(s_percent, *head);
    if (*use == NULL) {
        Py_CLEAR(*head);
        return -1;
    }
    if (number < SHARED_NUMBERS) {
        number_heads[number] = Py_NewRef(*head);
        number_uses[number] = Py_NewRef(*use);
    }
    return 0;
}

/* 1 when `name` is in `scope` or an enclosing one (_Scope.__contains__), 0 when not, -1 error */
static int in_scope(PyObject *scope, PyObject *name) {
    Py_INCREF(scope);
    while (scope != Py_None) {
        PyObject *names = tilebc_slot(scope, s_names, &slot_names);
        int found = names == NULL ? -1 : PyAnySet_Check(names) ? PySet_Contains(names, name)
                                                             : PySequence_Contains(names, name);
        Py_XDECREF(names);
        if (found != 0) {
            Py_DECREF(scope);
            return found;
        }
        PyObject *parent = tilebc_slot(scope, s_parent, &slot_parent);
        Py_DECREF(scope);
        if (parent == NULL)
            return -1;
        scope = parent;
    }
    Py_DECREF(scope);
    return 0;
}

/* FunctionNames._unique: `name` sanitized, made unique in the scope chain, added to `scope` */
static PyObject *unique(Counters *counters, PyObject *name, PyObject *scope,
                        PyObject *sanitize) {
    PyObject *clean = PyObject_CallOneArg(sanitize, name);
    if (clean == NULL)
        return NULL;
    if (!PyUnicode_Check(clean)) {
        PyErr_SetString(PyExc_TypeError, "number_ops: sanitize gave no str");
        Py_DECREF(clean);
        return NULL;
    }
    int taken = in_scope(scope, clean);
    while (taken > 0) {  /* _renamed: `name_K`, K the function's next conflict number */
        PyObject *probe = PyUnicode_FromFormat("%U_%zd", clean, counters->next_conflict++);
        if (probe == NULL) {
            taken = -1;
            break;
        }
        taken = in_scope(scope, probe);
        if (taken == 0) {
            Py_DECREF(clean);
            clean = probe;
        } else {
            Py_DECREF(probe);
        }
    }
    if (taken < 0) {
        Py_DECREF(clean);
        return NULL;
    }
    PyObject *own = tilebc_slot(scope, s_names, &slot_names);
    int failed = own == NULL || PySet_Add(own, clean) < 0;
    Py_XDECREF(own);
    if (failed) {
        Py_DECREF(clean);
        return NULL;
    }
    return clean;
}

/* text[value] = head (unless text is NULL); refs[value] = "%" + head, or "%head#k" with k the
 * value's `index` when `grouped` */
static int set_name(PyObject *text, PyObject *refs, PyObject *value, PyObject *head,
                    int grouped) {
    PyObject *ref;
    if (grouped) {
        PyObject *index = tilebc_slot(value, s_index, &slot_index);
        ref = index == NULL ? NULL : PyUnicode_FromFormat("%%%U#%S", head, index);
        Py_XDECREF(index);
    } else {
        ref = PyUnicode_Concat(s_percent, head);
    }
    int failed = ref == NULL || (text != NULL && PyDict_SetItem(text, value, head) < 0)
                 || PyDict_SetItem(refs, value, ref) < 0;
    Py_XDECREF(ref);
    return failed ? -1 : 0;
}

/* FunctionNames._set: `value` named `name` made unique, or numbered when `name` is empty or None */
static int set_value(Counters *counters, PyObject *value, PyObject *name, PyObject *scope,
                     PyObject *sanitize, PyObject *text, PyObject *refs) {
    int named = name == Py_None ? 0 : PyObject_IsTrue(name);
    if (named < 0)
        return -1;
    if (!named) {
        PyObject *head, *use;
        if (numbered(counters->next_value++, &head, &use) < 0)
            return -1;
        int failed = PyDict_SetItem(text, value, head) < 0 || PyDict_SetItem(refs, value, use) < 0;
        Py_DECREF(head);
        Py_DECREF(use);
        return failed ? -1 : 0;
    }
    PyObject *head = unique(counters, name, scope, sanitize);
    if (head == NULL)
        return -1;
    int status = set_name(text, refs, value, head, 0);
    Py_DECREF(head);
    return status;
}

static PyObject *rule_for(PyObject *spec, PyObject *rules, PyObject *rule_of);

/* What number_ops reads besides its arguments: the known constant names and the Op class (both
 * NULL when the caller passed neither: every suggestion is then suggest's). */
typedef struct {
    PyObject *constants, *op_class, *value_class, *rules, *rule_of, *suggested;
} Hints;

/* suggested_names(op) for the two rules asked most, where it needs no Python: "@constant" with
 * the name remembered for its attribute (names._CONSTANT_BY_ID: id -> (attribute, name)), and
 * "@assume" of a value whose producer is no op, names nothing, or whose suggestion is in
 * `suggested` already. A new list; NULL without an error: ask suggest. */
static PyObject *quick_suggestion(Hints *hints, PyObject *op, PyObject *rule, Py_ssize_t count) {
    if (hints->constants == NULL || count != 1 || !PyUnicode_Check(rule))
        return NULL;
    PyObject *name = NULL;
    if (PyUnicode_CompareWithASCIIString(rule, "@constant") == 0) {
        PyObject *attrs = tilebc_slot(op, s_attrs, &slot_attrs);
        PyObject *dense = attrs != NULL && tilebc_is_fields(attrs)
                          ? tilebc_fields_get(attrs, s_value) : NULL;
        PyObject *found = dense != NULL ? tilebc_pair_by_id(hints->constants, dense) : NULL;
        if (found != NULL && PyUnicode_Check(found))
            name = Py_NewRef(found);
        Py_XDECREF(attrs);
    } else if (PyUnicode_CompareWithASCIIString(rule, "@assume") == 0) {
        /* "assume", or "assume_" + the producer's suggestion for the value when it offers names */
        PyObject *operands = tilebc_slot(op, s_operands, &slot_operands);
        PyObject *value = operands != NULL && tilebc_is_fields(operands)
                          ? tilebc_fields_get(operands, s_value) : NULL;
        if (value != NULL && (PyObject *)Py_TYPE(value) != hints->value_class)
            value = NULL;  /* a Value of another class: its owner and index are Python's */
        Py_XINCREF(value);
        Py_XDECREF(operands);
        /* Value.owner: its weak reference called (the property is Python code) */
        PyObject *weak = value != NULL ? tilebc_slot(value, s_owner, &slot_owner) : NULL, *owner = NULL;
        if (weak != NULL) {
            owner = weak == Py_None ? Py_NewRef(Py_None)
                    : PyWeakref_CheckRef(weak) ? PyObject_CallNoArgs(weak) : NULL;
            Py_DECREF(weak);
        }
        int is_op = owner != NULL ? PyObject_IsInstance(owner, hints->op_class) : -1;
        PyObject *producer_rule = NULL;
        if (is_op == 1) {
            PyObject *spec = tilebc_slot(owner, s_spec, &slot_spec);
            producer_rule = spec != NULL ? rule_for(spec, hints->rules, hints->rule_of) : NULL;
            Py_XDECREF(spec);
        }
        if (is_op == 0 || (producer_rule == Py_None)) {
            name = PyUnicode_FromString("assume");
        } else if (producer_rule != NULL) {
            PyObject *index = tilebc_slot(value, s_index, &slot_index);
            Py_ssize_t at = index != NULL ? PyLong_AsSsize_t(index) : -1;
            PyObject *given = index != NULL ? tilebc_by_id(hints->suggested, owner) : NULL;
            if (given != NULL && PyList_Check(given) && 0 <= at && at < PyList_GET_SIZE(given)) {
                PyObject *part = PyList_GET_ITEM(given, at);
                if (part == Py_None)
                    name = PyUnicode_FromString("assume_");
                else if (PyUnicode_Check(part))
                    name = PyUnicode_FromFormat("assume_%U", part);
            }
            Py_XDECREF(index);
        }
        Py_XDECREF(producer_rule);
        Py_XDECREF(owner);
        Py_XDECREF(value);
    }
    if (name == NULL) {
        tilebc_recoverable();  /* anything unusual: suggest says what it is (an interrupt stays) */
        return NULL;
    }
    PyObject *suggestion = PyList_New(1);
    if (suggestion == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    PyList_SET_ITEM(suggestion, 0, name);
    return suggestion;
}

/* FunctionNames._number_named: the results named as suggest(op, names) says, the unnamed ones
 * after a named one forming a group used as `%head#k` */
static int number_named(PyObject *names_obj, Counters *counters, PyObject *op,
                        PyObject **results, Py_ssize_t count, PyObject *scope,
                        PyObject *sanitize, PyObject *suggest, PyObject *suggested,
                        PyObject *text, PyObject *refs, Hints *hints, PyObject *rule) {
    PyObject *suggestion = quick_suggestion(hints, op, rule, count);
    if (suggestion == NULL) {
        if (PyErr_Occurred())
            return -1;
        suggestion = PyObject_CallFunctionObjArgs(suggest, op, names_obj, NULL);
    }
    PyObject *groups = NULL, *key = NULL, *names = NULL;
    int status = -1;
    if (suggestion == NULL)
        return -1;
    if (!PyList_Check(suggestion) || PyList_GET_SIZE(suggestion) != count) {
        PyErr_SetString(PyExc_TypeError, "number_ops: a suggestion is not a list of the results");
        goto done;
    }
    key = PyLong_FromVoidPtr(op);
    if (key == NULL || PyDict_SetItem(suggested, key, suggestion) < 0)
        goto done;
    if (count == 1) {  /* one result: its suggestion, else the next number */
        status = set_value(counters, results[0], PyList_GET_ITEM(suggestion, 0), scope, sanitize,
                           text, refs);
        goto done;
    }
    groups = PyList_New(0);
    PyObject *zero = PyLong_FromLong(0);
    if (groups == NULL || zero == NULL || PyList_Append(groups, zero) < 0) {
        Py_XDECREF(zero);
        goto done;
    }
    Py_DECREF(zero);
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *name = PyList_GET_ITEM(suggestion, index);
        if (name == Py_None)
            continue;
        if (set_value(counters, results[index], name, scope, sanitize, text, refs) < 0)
            goto done;
        if (index) {
            PyObject *start = PyLong_FromSsize_t(index);
            int failed = start == NULL || PyList_Append(groups, start) < 0;
            Py_XDECREF(start);
            if (failed)
                goto done;
        }
    }
    int known = PyDict_Contains(text, results[0]);
    if (known < 0 || (!known && set_value(counters, results[0], Py_None, scope, sanitize, text,
                                          refs) < 0))
        goto done;
    Py_ssize_t n_groups = PyList_GET_SIZE(groups);
    if (n_groups > 1) {
        names = PyObject_GetAttrString(names_obj, "groups");
        if (names == NULL || PyObject_SetItem(names, key, groups) < 0)
            goto done;
    }
    if (count > 1) {  /* _group_refs */
        for (Py_ssize_t g = 0; g < n_groups; g++) {
            Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(groups, g));
            Py_ssize_t end = g + 1 < n_groups ? PyLong_AsSsize_t(PyList_GET_ITEM(groups, g + 1))
                                              : count;
            PyObject *head = PyDict_GetItemWithError(text, results[start]);
            if (head == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_KeyError, "number_ops: a group head has no name");
                goto done;
            }
            for (Py_ssize_t k = 0; k < end - start; k++) {
                PyObject *ref = end - start == 1 ? PyUnicode_Concat(s_percent, head)
                                                 : PyUnicode_FromFormat("%%%U#%zd", head, k);
                int failed = ref == NULL || PyDict_SetItem(refs, results[start + k], ref) < 0;
                Py_XDECREF(ref);
                if (failed)
                    goto done;
            }
        }
    }
    status = 0;
done:
    Py_XDECREF(names);
    Py_XDECREF(groups);
    Py_XDECREF(key);
    Py_DECREF(suggestion);
    return status;
}

/* The naming rule of `spec` from `rules` ({id(spec): (spec, rule)}), else rule_of(spec). */
static PyObject *rule_for(PyObject *spec, PyObject *rules, PyObject *rule_of) {
    PyObject *rule = tilebc_pair_by_id(rules, spec);
    if (rule != NULL)
        return Py_NewRef(rule);
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(rule_of, spec);
}

/* The rules of the op kinds number_ops met so far (a block has few kinds): found by the spec's
 * address, no dict asked. Strong references, dropped when the call ends. */
#define RULE_CACHE 16
typedef struct {
    PyObject *spec[RULE_CACHE], *rule[RULE_CACHE];
    int used;
} RuleCache;

static PyObject *cached_rule(RuleCache *cache, PyObject *spec, PyObject *rules,
                             PyObject *rule_of) {
    for (int i = 0; i < cache->used; i++)
        if (cache->spec[i] == spec)
            return Py_NewRef(cache->rule[i]);
    PyObject *rule = rule_for(spec, rules, rule_of);
    if (rule != NULL && cache->used < RULE_CACHE) {
        cache->spec[cache->used] = Py_NewRef(spec);
        cache->rule[cache->used++] = Py_NewRef(rule);
    }
    return rule;
}

static void clear_rules(RuleCache *cache) {
    for (int i = 0; i < cache->used; i++) {
        Py_DECREF(cache->spec[i]);
        Py_DECREF(cache->rule[i]);
    }
    cache->used = 0;
}

static int number_op(PyObject *names_obj, Counters *counters, PyObject *op, PyObject *scope,
                     PyObject *nested, PyObject *rules, PyObject *rule_of, PyObject *sanitize,
                     PyObject *suggest, PyObject *suggested, PyObject *text, PyObject *refs,
                     Hints *hints, RuleCache *cache) {
    PyObject *regions = tilebc_slot(op, s_regions, &slot_regions);
    if (regions == NULL)
        return -1;
    /* most ops hold the shared empty tuple */
    int truth = PyTuple_CheckExact(regions) ? PyTuple_GET_SIZE(regions) > 0
                                            : PyObject_IsTrue(regions);
    Py_DECREF(regions);
    if (truth < 0 || (truth && PyList_Append(nested, op) < 0))
        return -1;
    PyObject *results = tilebc_slot(op, s_results, &slot_results);
    if (results == NULL)
        return -1;
    int status = -1;
    PyObject *spec = NULL, *rule = NULL, *results_list = NULL, *only = NULL;
    PyObject **items;
    Py_ssize_t count;
    if (PyList_CheckExact(results) && PyList_GET_SIZE(results) <= 1) {
        /* no result, or one: held here, no copy (the usual op) */
        count = PyList_GET_SIZE(results);
        if (count == 0) {
            status = 0;
            goto done;
        }
        only = Py_NewRef(PyList_GET_ITEM(results, 0));
        items = &only;
    } else {
        /* a copy: suggest is Python code, which may change the op's results */
        results_list = PySequence_Tuple(results);
        if (results_list == NULL)
            goto done;
        count = PyTuple_GET_SIZE(results_list);
        if (count == 0) {
            status = 0;
            goto done;
        }
        items = &PyTuple_GET_ITEM(results_list, 0);
    }
    spec = tilebc_slot(op, s_spec, &slot_spec);
    if (spec == NULL || (rule = cached_rule(cache, spec, rules, rule_of)) == NULL)
        goto done;
    if (rule == Py_None && count == 1) {  /* no suggested names, one result: the next number */
        PyObject *head, *use;
        if (numbered(counters->next_value++, &head, &use) < 0)
            goto done;
        int failed = PyDict_SetItem(text, items[0], head) < 0
                     || PyDict_SetItem(refs, items[0], use) < 0;
        Py_DECREF(head);
        Py_DECREF(use);
        status = failed ? -1 : 0;
    } else if (rule == Py_None) {  /* no suggested names: one numbered group */
        PyObject *head = number_text(counters->next_value++);
        if (head == NULL)
            goto done;
        int failed = PyDict_SetItem(text, items[0], head) < 0;
        for (Py_ssize_t i = 0; i < count && !failed; i++)
            failed = set_name(NULL, refs, items[i], head, 1) < 0;
        Py_DECREF(head);
        status = failed ? -1 : 0;
    } else if (count == 1 && PyUnicode_Check(rule) && PyUnicode_GET_LENGTH(rule) > 0
               && PyUnicode_READ_CHAR(rule, 0) != '@') {  /* the op's one fixed name */
        PyObject *name = unique(counters, rule, scope, sanitize);
        if (name == NULL)
            goto done;
        status = set_name(text, refs, items[0], name, 0);
        Py_DECREF(name);
    } else {
        status = number_named(names_obj, counters, op, items, count, scope, sanitize, suggest,
                              suggested, text, refs, hints, rule);
    }
done:
    Py_XDECREF(rule);
    Py_XDECREF(spec);
    Py_XDECREF(results_list);
    Py_XDECREF(only);
    Py_DECREF(results);
    return status;
}

/* number_ops(names, ops, scope, nested, rules, rule_of, sanitize, suggest[, constants,
 * op_class, value_class]): see the top of this file; with the last three, quick_suggestion
 * names constants and assumes it can without calling suggest */
static PyObject *number_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 && nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "number_ops takes 8 or 11 arguments");
        return NULL;
    }
    PyObject *names_obj = args[0], *ops = args[1], *scope = args[2], *nested = args[3];
    PyObject *rules = args[4], *rule_of = args[5], *sanitize = args[6], *suggest = args[7];
    Hints hints = {NULL, NULL, NULL, rules, rule_of, NULL};
    if (nargs == 11) {
        hints.constants = args[8];
        hints.op_class = args[9];
        hints.value_class = args[10];
        if (!PyDict_Check(hints.constants) || !PyType_Check(hints.op_class)
                || !PyType_Check(hints.value_class)) {
            PyErr_SetString(PyExc_TypeError, "number_ops: constants must be a dict, op_class "
                            "and value_class types");
            return NULL;
        }
    }
    if (!PyList_Check(nested) || !PyDict_Check(rules)) {
        PyErr_SetString(PyExc_TypeError, "number_ops: nested must be a list, rules a dict");
        return NULL;
    }
    PyObject *text = PyObject_GetAttr(names_obj, s_text);
    PyObject *refs = text == NULL ? NULL : PyObject_GetAttr(names_obj, s_refs);
    PyObject *suggested = refs == NULL ? NULL : PyObject_GetAttr(names_obj, s_suggested);
    /* copies: the callbacks are Python code, which may change the op list or an op's results */
    PyObject *sequence = suggested == NULL ? NULL : PySequence_Tuple(ops);
    Counters counters;
    int failed = sequence == NULL || load_counter(names_obj, s_next_value, &counters.next_value) < 0
                 || load_counter(names_obj, s_next_conflict, &counters.next_conflict) < 0;
    if (!failed && (!PyDict_Check(text) || !PyDict_Check(refs) || !PyDict_Check(suggested))) {
        PyErr_SetString(PyExc_TypeError, "number_ops: text, refs and _suggested must be dicts");
        failed = 1;
    }
    hints.suggested = suggested;
    if (!failed) {
        /* a tuple or list of ops: the callbacks only suggest names, they change no block */
        RuleCache cache;
        cache.used = 0;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence) && !failed; i++)
            failed = number_op(names_obj, &counters, PySequence_Fast_GET_ITEM(sequence, i), scope,
                               nested, rules, rule_of, sanitize, suggest, suggested, text,
                               refs, &hints, &cache) < 0;
        clear_rules(&cache);
        PyObject *type, *value, *traceback;  /* an error of the loop's stays the one raised */
        PyErr_Fetch(&type, &value, &traceback);
        if (store_counter(names_obj, s_next_value, counters.next_value) < 0
                || store_counter(names_obj, s_next_conflict, counters.next_conflict) < 0)
            failed = 1;
        if (type != NULL) {
            PyErr_Restore(type, value, traceback);
        }
    }
    Py_XDECREF(sequence);
    Py_XDECREF(suggested);
    Py_XDECREF(refs);
    Py_XDECREF(text);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *s_type_name, *s_keyword, *s_type_text, *s_texts, *s_printer, *s_attribute_texts;
static PyObject *s_mnemonic, *s_equals, *s_newline, *s_space, *s_known, *s_ref, *s_visit,
    *s_groups, *s_comma;

#define MAX_GROUPS 16  /* an op of more result groups is printed by the `op` method */

/* Whether `known` is a marking printer's (order, mark): alias_aside.MarkedLocations. */
static int marking(PyObject *known) {
    return PyTuple_CheckExact(known) && PyTuple_GET_SIZE(known) == 2
           && PyList_CheckExact(PyTuple_GET_ITEM(known, 0))
           && PyUnicode_CheckExact(PyTuple_GET_ITEM(known, 1));
}

/* aliases.ref(loc): the text `aliases` keeps for `loc`, else its method's answer (new ref) */
static PyObject *location_text(PyObject *aliases, PyObject *known, PyObject *loc) {
    if (PyTuple_CheckExact(known)) {  /* marking: ref() appends the location and answers MARK */
        if (PyList_Append(PyTuple_GET_ITEM(known, 0), loc) < 0)
            return NULL;
        return Py_NewRef(PyTuple_GET_ITEM(known, 1));
    }
    /* the aliases' _known map: id(loc) -> (loc, its text, or None before `finish`) */
    PyObject *text = tilebc_pair_by_id(known, loc);
    if (text != NULL && text != Py_None)
        return Py_NewRef(text);
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallMethodOneArg(aliases, s_ref, loc);
}

/* Append to `pieces` the text of `op` after its indentation as the printer's `op` method gives
 * it (`%ref = ` or its result groups' heads, the mnemonic, its body, ` loc(...)`; joined once for
 * the whole block), for an op of a kind with a compiled body printer whose result groups `text`
 * and `groups` (names.text, names.groups) say: 1. 0 without an exception for any other op (the
 * `op` method prints it; nothing appended); -1 with an exception when printing
 * it fails: an error of the kinds the `op` method turns into "cannot print" becomes
 * cannot_print(op, error)'s answer, any other propagates, and the body printer never runs twice. */
/* "".join(pieces), a new str (NULL on error) */
static PyObject *joined(PyObject *pieces) {
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL)
        return NULL;
    PyObject *text = PyUnicode_Join(empty, pieces);
    Py_DECREF(empty);
    return text;
}

/* What body programs read besides the op: the type texts of this print (id(type) -> text) and
 * the function making one (type_text), both NULL where the printer has none; the attribute
 * texts of this print (id(attribute) -> (attribute, text)), NULL where it has none. */
typedef struct {
    PyObject *texts, *type_text, *attribute_texts;
} ProgramContext;

enum { STEP_TEXT, STEP_REF, STEP_REFS, STEP_TYPE, STEP_TYPES, STEP_RESULT_TYPE, STEP_KEYWORD,
       STEP_CALL, STEP_GROUP, STEP_ATTRIBUTE_TEXT };
/* the tests of a STEP_GROUP (printer.py GROUP_*) */
enum { GROUP_OPERAND, GROUP_ATTR_TRUE, GROUP_ATTR_SET, GROUP_CALL, GROUP_NOT_DEFAULT };

/* The text of `value`'s type (a new reference): from the print's texts, else type_text(type). */
static PyObject *type_text_of(ProgramContext *pc, PyObject *value) {
    PyObject *type = tilebc_slot(value, s_type_name, &slot_type);
    if (type == NULL)
        return NULL;
    PyObject *text = tilebc_by_id(pc->texts, type);
    if (text != NULL && PyUnicode_Check(text))
        text = Py_NewRef(text);
    else if (!PyErr_Occurred())
        text = PyObject_CallOneArg(pc->type_text, type);
    else
        text = NULL;
    Py_DECREF(type);
    if (text != NULL && !PyUnicode_Check(text)) {
        Py_CLEAR(text);
        PyErr_SetString(PyExc_TypeError, "a type's text is not a str");
    }
    return text;
}

/* Appends to `parts` the items of group `values` (a tuple) made by `one` (the use or the type
 * text of each), ", " between them; -1 on failure. */
static int append_each(PyObject *parts, PyObject *values, int types, PyObject *refs,
                       ProgramContext *pc) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
        PyObject *value = PyTuple_GET_ITEM(values, i), *text;
        if (i && PyList_Append(parts, s_comma) < 0)
            return -1;
        if (types) {
            text = type_text_of(pc, value);
        } else {
            text = PyDict_GetItemWithError(refs, value);
            Py_XINCREF(text);
        }
        int failed = text == NULL || PyList_Append(parts, text) < 0;
        Py_XDECREF(text);
        if (failed)
            return -1;
    }
    return 0;
}

/* What the steps of one op's program read: the op and its parts, fetched once. */
typedef struct {
    PyObject *op, *ctx, *refs, *operands, *attrs, *results;
    ProgramContext *pc;
    PyTypeObject *value_class;
} ProgramRun;

static PyObject *run_attrs(ProgramRun *run) {
    if (run->attrs == NULL) {
        run->attrs = tilebc_slot(run->op, s_attrs, &slot_attrs);
        if (run->attrs != NULL && !tilebc_is_fields(run->attrs)) {
            Py_CLEAR(run->attrs);
            PyErr_SetString(PyExc_TypeError, "an op's attrs are not a dict");
        }
    }
    return run->attrs;
}

/* function(op, ctx, *args) (a directive), or function(op, *args) without `with_ctx` (a group's
 * test): a new reference */
static PyObject *call_with_op(ProgramRun *run, PyObject *function, PyObject *args,
                              int with_ctx) {
    Py_ssize_t count = PyTuple_GET_SIZE(args), first = with_ctx ? 2 : 1;
    PyObject *call[2 + 8];
    if (count > 8) {
        PyErr_SetString(PyExc_TypeError, "a program step passes more than 8 arguments");
        return NULL;
    }
    call[0] = run->op;
    call[1] = run->ctx;
    for (Py_ssize_t k = 0; k < count; k++)
        call[first + k] = PyTuple_GET_ITEM(args, k);
    return PyObject_Vectorcall(function, call, first + count, NULL);
}

/* Whether the optional group of a STEP_GROUP (kind, test, argument, steps) prints: 1, 0, -1 */
static int group_present(ProgramRun *run, long test, PyObject *arg) {
    if (test == GROUP_OPERAND) {
        PyObject *group = tilebc_fields_get(run->operands, arg);
        if (group == NULL)
            return -1;
        return PyTuple_CheckExact(group) ? PyTuple_GET_SIZE(group) > 0 : group != Py_None;
    }
    if (test == GROUP_ATTR_TRUE || test == GROUP_ATTR_SET) {
        PyObject *attrs = run_attrs(run);
        if (attrs == NULL)
            return -1;
        PyObject *value = tilebc_fields_get(attrs, arg);
        if (value == NULL)
            return PyErr_Occurred() ? -1 : 0;
        return test == GROUP_ATTR_SET ? value != Py_None : PyObject_IsTrue(value);
    }
    if (test == GROUP_NOT_DEFAULT && PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 2) {
        /* (name, default): the attribute (None when absent) differs from its default */
        PyObject *attrs = run_attrs(run);
        if (attrs == NULL)
            return -1;
        PyObject *value = tilebc_fields_get(attrs, PyTuple_GET_ITEM(arg, 0));
        if (value == NULL && PyErr_Occurred())
            return -1;
        return PyObject_RichCompareBool(value != NULL ? value : Py_None, PyTuple_GET_ITEM(arg, 1),
                                        Py_NE);
    }
    if (test == GROUP_CALL && PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 2
            && PyTuple_Check(PyTuple_GET_ITEM(arg, 1))) {  /* (function, args): function(op, *args) */
        PyObject *answer = call_with_op(run, PyTuple_GET_ITEM(arg, 0), PyTuple_GET_ITEM(arg, 1),
                                        0);
        if (answer == NULL)
            return -1;
        int present = PyObject_IsTrue(answer);
        Py_DECREF(answer);
        return present;
    }
    return -1;
}

/* Appends the texts of `steps` to `parts`: 0, or -1 where a step cannot be made. */
static int run_steps(ProgramRun *run, PyObject *steps, PyObject *parts, int depth) {
    if (!PyTuple_Check(steps) || depth > 16)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps); i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i), *made = NULL;
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) < 2)
            return -1;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
        PyObject *arg = PyTuple_GET_ITEM(step, 1);
        if (kind == STEP_TEXT) {
            made = Py_NewRef(arg);
        } else if (kind >= STEP_REF && kind <= STEP_TYPES) {
            PyObject *group = tilebc_fields_get(run->operands, arg);
            if (group == NULL)
                return -1;
            if (kind == STEP_REF || kind == STEP_TYPE) {
                if (Py_TYPE(group) != run->value_class)
                    return -1;
                if (kind == STEP_TYPE) {
                    made = type_text_of(run->pc, group);
                } else {
                    made = PyDict_GetItemWithError(run->refs, group);
                    Py_XINCREF(made);
                }
            } else {
                if (!PyTuple_CheckExact(group)
                        || append_each(parts, group, kind == STEP_TYPES, run->refs, run->pc) < 0)
                    return -1;
                continue;
            }
        } else if (kind == STEP_RESULT_TYPE) {
            if (run->results == NULL
                    && (run->results = tilebc_slot(run->op, s_results, &slot_results)) == NULL)
                return -1;
            Py_ssize_t index = PyLong_AsSsize_t(arg);
            if (!PyList_Check(run->results) || index < 0
                    || index >= PyList_GET_SIZE(run->results))
                return -1;
            made = type_text_of(run->pc, PyList_GET_ITEM(run->results, index));
        } else if (kind == STEP_KEYWORD) {
            PyObject *attrs = run_attrs(run);
            PyObject *value = attrs == NULL ? NULL : tilebc_fields_get(attrs, arg);
            made = value == NULL ? NULL : PyObject_GetAttr(value, s_keyword);
        } else if (kind == STEP_CALL && PyTuple_GET_SIZE(step) == 3
                   && PyTuple_Check(PyTuple_GET_ITEM(step, 2))) {
            made = call_with_op(run, arg, PyTuple_GET_ITEM(step, 2), 1);
        } else if (kind == STEP_ATTRIBUTE_TEXT && PyTuple_GET_SIZE(step) == 4
                   && PyTuple_Check(PyTuple_GET_ITEM(step, 2))) {
            /* (kind, directive, args, attribute name): the text this print made for the very
             * attribute object, else the directive's (which keeps it) */
            PyObject *attrs = run->pc->attribute_texts != NULL ? run_attrs(run) : NULL;
            PyObject *value = attrs != NULL
                              ? tilebc_fields_get(attrs, PyTuple_GET_ITEM(step, 3)) : NULL;
            PyObject *known = value != NULL
                              ? tilebc_pair_by_id(run->pc->attribute_texts, value) : NULL;
            if (known != NULL && PyUnicode_Check(known))
                made = Py_NewRef(known);
            else if (PyErr_Occurred())
                return -1;
            else
                made = call_with_op(run, arg, PyTuple_GET_ITEM(step, 2), 1);
        } else if (kind == STEP_GROUP && PyTuple_GET_SIZE(step) == 4) {
            long test = PyLong_AsLong(arg);
            int present = test == -1 && PyErr_Occurred()
                          ? -1 : group_present(run, test, PyTuple_GET_ITEM(step, 2));
            if (present < 0
                    || (present && run_steps(run, PyTuple_GET_ITEM(step, 3), parts, depth + 1) < 0))
                return -1;
            continue;
        } else {
            return -1;
        }
        int failed = made == NULL || !PyUnicode_Check(made) || PyList_Append(parts, made) < 0;
        Py_XDECREF(made);
        if (failed)
            return -1;
    }
    return 0;
}

/* The op's body text from its program (see printer.body_program), a new str; NULL without an
 * error set: the fast printer prints this op (it is shaped otherwise, something is missing, or a
 * directive failed: that printer then says what). */
static PyObject *run_program(PyObject *program, PyObject *op, PyObject *ctx, PyObject *refs,
                             ProgramContext *pc, PyTypeObject *value_class) {
    if (pc->texts == NULL || !PyTuple_Check(program) || PyTuple_GET_SIZE(program) != 2)
        return NULL;
    PyObject *shapes = PyTuple_GET_ITEM(program, 0), *steps = PyTuple_GET_ITEM(program, 1);
    ProgramRun run = {op, ctx, refs, tilebc_slot(op, s_operands, &slot_operands), NULL, NULL, pc,
                      value_class};
    PyObject *parts = NULL, *text = NULL;
    if (run.operands == NULL || !tilebc_is_fields(run.operands) || !PyTuple_Check(shapes)
            || !PyTuple_Check(steps))
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shapes); i++) {
        PyObject *shape = PyTuple_GET_ITEM(shapes, i);
        if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 2)
            goto done;
        PyObject *group = tilebc_fields_get(run.operands, PyTuple_GET_ITEM(shape, 0));
        long arity = PyLong_AsLong(PyTuple_GET_ITEM(shape, 1));
        if (group == NULL)
            goto done;
        int shaped = arity == 0 ? Py_TYPE(group) == value_class
                   : arity == 1 ? group == Py_None || Py_TYPE(group) == value_class
                   : arity == 2 ? PyTuple_CheckExact(group) : 0;
        if (!shaped)
            goto done;
    }
    parts = PyList_New(0);
    if (parts == NULL || run_steps(&run, steps, parts, 0) < 0)
        goto done;
    text = joined(parts);
done:
    Py_XDECREF(parts);
    Py_XDECREF(run.results);
    Py_XDECREF(run.attrs);
    Py_XDECREF(run.operands);
    return text;
}

static int quick_line(PyObject *pieces, PyObject *op, PyObject *ctx, PyObject *printers,
                      PyObject *refs, PyObject *aliases, PyObject *known,
                      PyObject *cannot_print, PyObject *text, PyObject *groups,
                      ProgramContext *pc, PyTypeObject *value_class) {
    PyObject *spec = tilebc_slot(op, s_spec, &slot_spec), *results = NULL, *body = NULL;
    PyObject *loc = NULL, *located = NULL, *printer = NULL, *result = NULL, *program = NULL;
    PyObject *mnemonic = NULL, *count_text = NULL, *frozen = NULL;
    Py_ssize_t count = 0;
    int status = 0;
    if (spec == NULL)  /* not an op the fast way knows: the `op` method says what is wrong */
        return tilebc_recoverable() ? 0 : -1;
    PyObject *found = tilebc_by_id(printers, spec);
    if (found == NULL || !PyTuple_Check(found) || PyTuple_GET_SIZE(found) < 2
            || PyTuple_GET_SIZE(found) > 3 || PyTuple_GET_ITEM(found, 0) != spec) {
        status = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    printer = PyTuple_GET_ITEM(found, 1);
    Py_INCREF(printer);  /* the printers map may change while Python code runs */
    /* the kind's body program (printer.body_program), where it has one */
    program = PyTuple_GET_SIZE(found) == 3 && value_class != NULL ? PyTuple_GET_ITEM(found, 2)
                                                                  : Py_None;
    Py_INCREF(program);
    results = tilebc_slot(op, s_results, &slot_results);
    if (results == NULL || !PyList_Check(results)) {
        status = tilebc_recoverable() ? 0 : -1;
        goto done;
    }
    count = PyList_GET_SIZE(results);
    /* the result groups' first results (names.result_groups): [0], or names.groups' starts */
    Py_ssize_t starts[MAX_GROUPS] = {0}, n_groups = 1;
    if (count > 1) {
        PyObject *given = text != NULL ? tilebc_by_id(groups, op) : NULL;
        if (PyErr_Occurred()) {
            status = -1;
            goto done;
        }
        if (text == NULL)
            goto done;
        if (given != NULL) {  /* read here, before any Python code runs */
            n_groups = PyList_Check(given) ? PyList_GET_SIZE(given) : 0;
            if (n_groups < 1 || n_groups > MAX_GROUPS)
                goto done;
            for (Py_ssize_t g = 0; g < n_groups; g++) {
                PyObject *start = PyList_GET_ITEM(given, g);
                starts[g] = PyLong_Check(start) ? PyLong_AsSsize_t(start) : -1;
                if (starts[g] < 0 || starts[g] >= count || (g && starts[g] <= starts[g - 1])
                        || (g == 0 && starts[g] != 0)) {
                    PyErr_Clear();
                    goto done;
                }
            }
        }
        frozen = PyList_AsTuple(results);  /* the body printer is Python code */
        if (frozen == NULL) {
            status = -1;
            goto done;
        }
    }
    if (count >= 1) {
        result = PyList_GET_ITEM(results, 0);
        Py_INCREF(result);
    }
    if (program != Py_None) {
        body = run_program(program, op, ctx, refs, pc, value_class);
        if (body == NULL && !tilebc_recoverable()) {
            status = -1;
            goto done;
        }
    }
    if (body == NULL)
        body = PyObject_CallFunctionObjArgs(printer, op, ctx, NULL);
    status = -1;
    if (body == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError) || PyErr_ExceptionMatches(PyExc_TypeError)
                || PyErr_ExceptionMatches(PyExc_KeyError) || PyErr_ExceptionMatches(PyExc_IndexError)
                || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyErr_NormalizeException(&type, &value, &traceback);
            PyObject *error = value == NULL ? NULL
                              : PyObject_CallFunctionObjArgs(cannot_print, op, value, NULL);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            if (error != NULL) {
                if (PyExceptionInstance_Check(error)) {
                    PyException_SetCause(error, NULL);  /* `raise ... from None` */
                    PyErr_SetObject((PyObject *)Py_TYPE(error), error);
                } else {
                    PyErr_SetString(PyExc_TypeError, "print_ops: cannot_print gave no exception");
                }
                Py_DECREF(error);
            }
        }
        goto done;
    }
    if (!PyUnicode_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "print_ops: a body printer gave no str");
        goto done;
    }
    mnemonic = PyObject_GetAttr(spec, s_mnemonic);
    if (mnemonic == NULL)
        goto done;
    if (count == 1) {
        PyObject *ref = PyDict_GetItemWithError(refs, result);
        if (ref == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, result);  /* as `names.refs[results[0]]` raises */
            goto done;
        }
        if (PyList_Append(pieces, ref) < 0 || PyList_Append(pieces, s_equals) < 0)
            goto done;
    } else if (count > 1) {  /* `%head:count, %head2 = ` */
        for (Py_ssize_t g = 0; g < n_groups; g++) {
            Py_ssize_t size = (g + 1 < n_groups ? starts[g + 1] : count) - starts[g];
            PyObject *first = PyTuple_GET_ITEM(frozen, starts[g]);
            PyObject *head = PyDict_GetItemWithError(text, first);
            if (head == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, first);  /* as `names.text[...]` raises */
                goto done;
            }
            if ((g && PyList_Append(pieces, s_comma) < 0) || PyList_Append(pieces, s_percent) < 0
                    || PyList_Append(pieces, head) < 0)
                goto done;
            if (size > 1) {
                count_text = PyUnicode_FromFormat(":%zd", size);
                int failed = count_text == NULL || PyList_Append(pieces, count_text) < 0;
                Py_CLEAR(count_text);
                if (failed)
                    goto done;
            }
        }
        if (PyList_Append(pieces, s_equals) < 0)
            goto done;
    }
    if (aliases != Py_None) {  /* ` loc(#locN)` */
        loc = tilebc_slot(op, s_loc, &slot_loc);
        located = loc == NULL ? NULL : location_text(aliases, known, loc);
        if (located == NULL)
            goto done;
    }
    if (PyList_Append(pieces, mnemonic) < 0 || PyList_Append(pieces, body) < 0)
        goto done;
    if (located != NULL && (PyList_Append(pieces, s_space) < 0
                            || PyList_Append(pieces, located) < 0))
        goto done;
    status = 1;
done:
    Py_XDECREF(frozen);
    Py_XDECREF(count_text);
    Py_XDECREF(mnemonic);
    Py_XDECREF(located);
    Py_XDECREF(loc);
    Py_XDECREF(body);
    Py_XDECREF(result);
    Py_XDECREF(results);
    Py_XDECREF(printer);
    Py_XDECREF(program);
    Py_DECREF(spec);
    return status;
}

/* print_ops(op_text, ops, ctx, indent, printers, refs, aliases, cannot_print) -> str: indent +
 * op_text(op, ctx) + "\n" for each op, the usual ops printed here (quick_line), the others by
 * op_text, the printer's `op` method. printers: {id(spec): (spec, body printer)}; refs: the value
 * names; aliases: None, or the location aliases (`-g`); cannot_print(op, error): the error the
 * `op` method raises when an op's body printer fails. */
static PyObject *print_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "print_ops takes 8 or 9 arguments");
        return NULL;
    }
    /* the ninth, the Value class: the kinds' body programs run here */
    PyTypeObject *value_class = nargs == 9 && PyType_Check(args[8]) ? (PyTypeObject *)args[8]
                                                                    : NULL;
    PyObject *op_text = args[0], *ops = args[1], *ctx = args[2], *indent = args[3];
    PyObject *printers = args[4], *refs = args[5], *aliases = args[6], *known = NULL;
    PyObject *cannot_print = args[7];
    if (!PyDict_Check(printers) || !PyDict_Check(refs) || !PyUnicode_Check(indent)) {
        PyErr_SetString(PyExc_TypeError, "print_ops: bad argument types");
        return NULL;
    }
    if (aliases != Py_None) {
        known = PyObject_GetAttr(aliases, s_known);
        if (known == NULL)
            return NULL;
        if (!PyDict_Check(known) && !marking(known)) {
            Py_DECREF(known);
            PyErr_SetString(PyExc_TypeError, "print_ops: the aliases' _known is not a dict or "
                            "an (order, mark) pair");
            return NULL;
        }
    }
    /* names.text and names.groups, for ops of several results (else the `op` method) */
    PyObject *names = PyObject_GetAttr(ctx, s_names), *text_names = NULL, *groups = NULL;
    if (names != NULL) {
        text_names = PyObject_GetAttr(names, s_text);
        groups = text_names != NULL ? PyObject_GetAttr(names, s_groups) : NULL;
        Py_DECREF(names);
    }
    if (groups == NULL || !PyDict_Check(text_names) || !PyDict_Check(groups)) {
        if (!tilebc_recoverable()) {
            Py_XDECREF(known);
            Py_XDECREF(text_names);
            Py_XDECREF(groups);
            return NULL;
        }
        Py_CLEAR(text_names);
        Py_CLEAR(groups);
    }
    /* ctx.printer.type_text and its texts, for the body programs */
    ProgramContext pc = {NULL, NULL, NULL};
    if (value_class != NULL) {
        PyObject *printer = PyObject_GetAttr(ctx, s_printer);
        pc.type_text = printer != NULL ? PyObject_GetAttr(printer, s_type_text) : NULL;
        pc.texts = pc.type_text != NULL ? PyObject_GetAttr(pc.type_text, s_texts) : NULL;
        if (pc.texts != NULL) {
            pc.attribute_texts = PyObject_GetAttr(printer, s_attribute_texts);
            if (pc.attribute_texts == NULL || !PyDict_Check(pc.attribute_texts)) {
                Py_CLEAR(pc.attribute_texts);
                PyErr_Clear();  /* none: the directives make every text */
            }
        }
        Py_XDECREF(printer);
        if (pc.texts == NULL || !PyDict_Check(pc.texts)) {
            Py_CLEAR(pc.texts);
            Py_CLEAR(pc.type_text);
            Py_CLEAR(pc.attribute_texts);
            if (!tilebc_recoverable()) {
                Py_XDECREF(known);
                Py_XDECREF(text_names);
                Py_XDECREF(groups);
                return NULL;
            }
        }
    }
    PyObject *sequence = PySequence_Tuple(ops);  /* a copy: Python code runs for every op */
    if (sequence == NULL) {
        Py_XDECREF(pc.texts);
        Py_XDECREF(pc.type_text);
        Py_XDECREF(pc.attribute_texts);
        Py_XDECREF(known);
        Py_XDECREF(text_names);
        Py_XDECREF(groups);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(sequence);
    PyObject *pieces = PyList_New(0), *text = NULL;
    if (pieces == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i % 4096 == 4095 && PyErr_CheckSignals() < 0)
            goto done;  /* a long block is one call: let Ctrl-C in */
        PyObject *op = PyTuple_GET_ITEM(sequence, i);
        if (PyList_Append(pieces, indent) < 0)
            goto done;
        int made = quick_line(pieces, op, ctx, printers, refs, aliases, known, cannot_print,
                              text_names, groups, &pc, value_class);
        if (made < 0)
            goto done;
        if (made == 0) {  /* quick_line appended nothing: the `op` method's line */
            PyObject *line = PyObject_CallFunctionObjArgs(op_text, op, ctx, NULL);
            int failed = line == NULL || PyList_Append(pieces, line) < 0;
            Py_XDECREF(line);
            if (failed)
                goto done;
        }
        if (PyList_Append(pieces, s_newline) < 0)
            goto done;
    }
    text = joined(pieces);
done:
    Py_XDECREF(pieces);
    Py_DECREF(sequence);
    Py_XDECREF(pc.texts);
    Py_XDECREF(pc.type_text);
    Py_XDECREF(pc.attribute_texts);
    Py_XDECREF(known);
    Py_XDECREF(text_names);
    Py_XDECREF(groups);
    return text;
}

/* The classes and constants alias_visit reads (LocationAliases' module, text/debuginfo.py). */
typedef struct {
    PyObject *unknown;  /* the normal form of an unknown location, ("unknown",) */
    PyObject *di_loc, *call_site, *subprogram, *compile_unit, *lexical_block, *unknown_attr;
} AliasKinds;

static PyObject *s_file, *s_filename, *s_line, *s_column, *s_scope, *s_callee, *s_caller,
    *s_compile_unit;

/* debuginfo._normal: UNKNOWN for None or an `unknown` attribute, else the location (new refs) */
static PyObject *alias_normal(AliasKinds *kinds, PyObject *loc) {
    if (loc == NULL)
        return NULL;
    int unknown = loc == Py_None ? 1 : PyObject_IsInstance(loc, kinds->unknown_attr);
    if (unknown < 0) {
        Py_DECREF(loc);
        return NULL;
    }
    if (unknown) {
        Py_DECREF(loc);
        return Py_NewRef(kinds->unknown);
    }
    return loc;
}

/* debuginfo._children as a new tuple (empty for a node that refers to nothing). */
static PyObject *alias_children(AliasKinds *kinds, PyObject *node) {
    PyObject *type = (PyObject *)Py_TYPE(node);
    if (type == kinds->di_loc) {  /* (("file", filename, line, column), scope) */
        PyObject *name = PyObject_GetAttr(node, s_filename);
        PyObject *line = name ? PyObject_GetAttr(node, s_line) : NULL;
        PyObject *column = line ? PyObject_GetAttr(node, s_column) : NULL;
        PyObject *file = column ? PyTuple_Pack(4, s_file, name, line, column) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(line);
        Py_XDECREF(column);
        PyObject *scope = file ? PyObject_GetAttr(node, s_scope) : NULL;
        PyObject *children = scope ? PyTuple_Pack(2, file, scope) : NULL;
        Py_XDECREF(file);
        Py_XDECREF(scope);
        return children;
    }
    PyObject *first = NULL, *second = NULL;
    int is;
    if ((is = PyObject_IsInstance(node, kinds->call_site)) != 0) {
        if (is < 0)
            return NULL;
        first = alias_normal(kinds, PyObject_GetAttr(node, s_callee));
        second = first ? alias_normal(kinds, PyObject_GetAttr(node, s_caller)) : NULL;
    } else if ((is = PyObject_IsInstance(node, kinds->subprogram)) != 0) {
        if (is < 0)
            return NULL;
        first = PyObject_GetAttr(node, s_file);
        second = first ? PyObject_GetAttr(node, s_compile_unit) : NULL;
    } else if ((is = PyObject_IsInstance(node, kinds->compile_unit)) != 0) {
        if (is < 0)
            return NULL;
        first = PyObject_GetAttr(node, s_file);
        PyObject *children = first ? PyTuple_Pack(1, first) : NULL;
        Py_XDECREF(first);
        return children;
    } else if ((is = PyObject_IsInstance(node, kinds->lexical_block)) != 0) {
        if (is < 0)
            return NULL;
        first = PyObject_GetAttr(node, s_scope);
        second = first ? PyObject_GetAttr(node, s_file) : NULL;
    } else {
        return PyTuple_New(0);
    }
    PyObject *children = second ? PyTuple_Pack(2, first, second) : NULL;
    Py_XDECREF(first);
    Py_XDECREF(second);
    return children;
}

/* LocationAliases._visit: records `node` (normal form) in `depths` (its print order: the node
 * before what it refers to) and returns its alias depth (a new reference). */
static PyObject *alias_depth(PyObject *depths, AliasKinds *kinds, PyObject *node) {
    PyObject *found = PyDict_GetItemWithError(depths, node);
    if (found != NULL) {
        if (found == Py_None) {  /* never: debug attributes form a DAG */
            PyErr_SetString(PyExc_TypeError, "a debug attribute refers to itself");
            return NULL;
        }
        return Py_NewRef(found);
    }
    if (PyErr_Occurred() || PyDict_SetItem(depths, node, Py_None) < 0)
        return NULL;
    if (Py_EnterRecursiveCall(" while visiting debug attributes") < 0)
        return NULL;
    PyObject *children = alias_children(kinds, node), *depth = NULL;
    long deepest = 0;
    for (Py_ssize_t i = 0; children != NULL && i < PyTuple_GET_SIZE(children); i++) {
        PyObject *below = alias_depth(depths, kinds, PyTuple_GET_ITEM(children, i));
        long value = below == NULL ? -1 : PyLong_AsLong(below);
        Py_XDECREF(below);
        if (value == -1 && PyErr_Occurred()) {
            Py_CLEAR(children);
            break;
        }
        if (value + 1 > deepest)
            deepest = value + 1;
    }
    Py_LeaveRecursiveCall();
    if (children != NULL) {
        depth = PyLong_FromLong(deepest);
        if (depth != NULL && PyDict_SetItem(depths, node, depth) < 0)
            Py_CLEAR(depth);
    }
    Py_XDECREF(children);
    return depth;
}

/* alias_visit(depths, node, unknown, di_loc, call_site, subprogram, compile_unit, lexical_block,
 * unknown_attr) -> depth: LocationAliases._visit(node) with its `_depth` dict, in C. */
static PyObject *alias_visit(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "alias_visit takes 9 arguments");
        return NULL;
    }
    if (!PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "alias_visit: depths must be a dict");
        return NULL;
    }
    for (int i = 3; i < 9; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "alias_visit: the location kinds must be types");
            return NULL;
        }
    }
    AliasKinds kinds = {args[2], args[3], args[4], args[5], args[6], args[7], args[8]};
    return alias_depth(args[0], &kinds, args[1]);
}

/* With `depths` (LocationAliases._depth) the walk visits each new location here, as
 * LocationAliases.visit does; without, it calls that method. */
typedef struct {
    PyObject *depths;
    AliasKinds kinds;
} Visiting;

static int visit_new(PyObject *loc, PyObject *known, Visiting *visiting);

/* The texts alias_definitions_text puts between a line's parts (made once). */
static PyObject *t_is_di_loc, *t_in, *t_close_line, *t_is_loc, *t_colon, *t_paren_line, *t_is;

/* Appends each of `items` to `parts` (which holds them from then on): -1 at the first missing
 * (an error set where it was made) or on an error. */
static int append_all(PyObject *parts, PyObject **items, int count) {
    for (int i = 0; i < count; i++)
        if (items[i] == NULL || PyList_Append(parts, items[i]) < 0)
            return -1;
    return 0;
}

/* str(names.get(node)) as the f-string writes it ("None" where it has none): a new reference */
static PyObject *alias_of(PyObject *names, PyObject *node) {
    PyObject *alias = PyDict_GetItemWithError(names, node);
    if (alias == NULL && PyErr_Occurred())
        return NULL;
    return PyObject_Str(alias != NULL ? alias : Py_None);
}

/* alias_definitions_text(nodes, aliases, names, define, di_loc, escaped) -> str:
 * LocationAliases.definitions' lines, each ended by a newline, in one str: a DILoc as
 * `#cuda_tile.di_loc<its file location's alias in its scope's alias>`, a DILoc's file location
 * ("file", filename, line, column) as `loc(escaped(filename):line:column)`, any other node as
 * define(node). A -g module's definitions are nearly all of the first two kinds: their parts are
 * joined once, without a str per line. */
static PyObject *alias_definitions_text(PyObject *module, PyObject *const *args,
                                        Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])
            || !PyDict_CheckExact(args[2]) || !PyType_Check(args[4])
            || PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_TypeError, "alias_definitions_text(nodes, aliases, names, define, "
                                         "di_loc, escaped): two lists of one length, a dict, a "
                                         "class");
        return NULL;
    }
    PyObject *names = args[2], *define = args[3], *escaped = args[5];
    PyTypeObject *di_loc = (PyTypeObject *)args[4];
    /* copies: looking up names may run Python code (a node's __eq__) */
    PyObject *nodes = PySequence_Tuple(args[0]), *aliases = PySequence_Tuple(args[1]);
    PyObject *parts = nodes != NULL && aliases != NULL ? PyList_New(0) : NULL;
    int failed = parts == NULL;
    for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(nodes); i++) {
        PyObject *node = PyTuple_GET_ITEM(nodes, i), *alias = PyTuple_GET_ITEM(aliases, i);
        if (!PyUnicode_Check(alias)) {
            PyErr_SetString(PyExc_TypeError, "alias_definitions_text: an alias is no str");
            failed = 1;
        } else if (Py_TYPE(node) == di_loc) {
            PyObject *scope = PyObject_GetAttr(node, s_scope);
            PyObject *filename = scope ? PyObject_GetAttr(node, s_filename) : NULL;
            PyObject *number = filename ? PyObject_GetAttr(node, s_line) : NULL;
            PyObject *column = number ? PyObject_GetAttr(node, s_column) : NULL;
            PyObject *file_loc = column ? PyTuple_Pack(4, s_file, filename, number, column)
                                        : NULL;
            PyObject *file_alias = file_loc ? alias_of(names, file_loc) : NULL;
            PyObject *scope_alias = file_alias ? alias_of(names, scope) : NULL;
            PyObject *line[6] = {alias, t_is_di_loc, file_alias, t_in, scope_alias, t_close_line};
            failed = append_all(parts, line, 6) < 0;
            Py_XDECREF(scope);
            Py_XDECREF(filename);
            Py_XDECREF(number);
            Py_XDECREF(column);
            Py_XDECREF(file_loc);
            Py_XDECREF(file_alias);
            Py_XDECREF(scope_alias);
        } else if (PyTuple_CheckExact(node) && PyTuple_GET_SIZE(node) == 4) {
            PyObject *file = PyObject_CallOneArg(escaped, PyTuple_GET_ITEM(node, 1));
            PyObject *number = file ? PyObject_Str(PyTuple_GET_ITEM(node, 2)) : NULL;
            PyObject *column = number ? PyObject_Str(PyTuple_GET_ITEM(node, 3)) : NULL;
            if (file != NULL && !PyUnicode_Check(file)) {
                PyErr_SetString(PyExc_TypeError, "alias_definitions_text: escaped gave no str");
                Py_CLEAR(column);
            }
            PyObject *line[8] = {alias, t_is_loc, file, t_colon, number, t_colon, column,
                                 t_paren_line};
            failed = append_all(parts, line, 8) < 0;
            Py_XDECREF(file);
            Py_XDECREF(number);
            Py_XDECREF(column);
        } else {
            PyObject *text = PyObject_CallOneArg(define, node);
            if (text != NULL && !PyUnicode_Check(text)) {
                PyErr_SetString(PyExc_TypeError, "alias_definitions_text: define gave no str");
                Py_CLEAR(text);
            }
            PyObject *line[4] = {alias, t_is, text, s_newline};
            failed = append_all(parts, line, 4) < 0;
            Py_XDECREF(text);
        }
    }
    PyObject *text = failed ? NULL : joined(parts);
    Py_XDECREF(parts);
    Py_XDECREF(nodes);
    Py_XDECREF(aliases);
    return text;
}

static int visit_node(PyObject *loc, Visiting *visiting);

/* alias_visit_all(locations, depths, unknown, *kinds): LocationAliases._visit(_normal(loc)) for
 * each of `locations` (a list), its `_depth` given (LocationAliases.visit_distinct: locations
 * not kept by identity). */
static PyObject *alias_visit_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyList_Check(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "alias_visit_all(locations, depths, unknown, *kinds): "
                                         "a list and a dict first");
        return NULL;
    }
    for (int i = 3; i < 9; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "alias_visit_all: the location kinds must be types");
            return NULL;
        }
    }
    Visiting visiting = {args[1], {args[2], args[3], args[4], args[5], args[6], args[7], args[8]}};
    PyObject *locations = PySequence_Tuple(args[0]);  /* a copy: equality may run Python code */
    if (locations == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(locations); i++) {
        if (visit_node(PyTuple_GET_ITEM(locations, i), &visiting) < 0) {
            Py_DECREF(locations);
            return NULL;
        }
    }
    Py_DECREF(locations);
    Py_RETURN_NONE;
}

static int visit_ops(PyObject *ops, PyObject *aliases, PyObject *known, Visiting *visiting,
                     int depth);

/* LocationAliases.visit(loc) of a location `known` lacks (_known[id(loc)] = (loc, None), then
 * _visit(_normal(loc))): 0, or -1 on error. */
static int visit_new(PyObject *loc, PyObject *known, Visiting *visiting) {
    PyObject *key = PyLong_FromVoidPtr(loc);
    PyObject *entry = key ? PyTuple_Pack(2, loc, Py_None) : NULL;
    int failed = entry == NULL || PyDict_SetItem(known, key, entry) < 0;
    Py_XDECREF(key);
    Py_XDECREF(entry);
    return failed ? -1 : visit_node(loc, visiting);
}

/* LocationAliases._visit(_normal(loc)): 0, or -1 on error. */
static int visit_node(PyObject *loc, Visiting *visiting) {
    PyObject *node = alias_normal(&visiting->kinds, Py_NewRef(loc));
    PyObject *found = node ? alias_depth(visiting->depths, &visiting->kinds, node) : NULL;
    Py_XDECREF(node);
    if (found == NULL)
        return -1;
    Py_DECREF(found);
    return 0;
}

/* visit_locations(ops, aliases): aliases.visit(op.loc) for `ops` and the ops nested in them, in
 * pre-order (printer._visit_locations), skipping the locations it knows already. */
static int visit_op(PyObject *op, PyObject *aliases, PyObject *known, Visiting *visiting,
                    int depth) {
    PyObject *loc = tilebc_slot(op, s_loc, &slot_loc);
    if (loc == NULL)
        return -1;
    /* its text (None before `finish`), or NULL for a location not visited yet */
    PyObject *known_text = tilebc_pair_by_id(known, loc);
    if (known_text == NULL && !PyErr_Occurred() && visiting != NULL) {
        if (visit_new(loc, known, visiting) < 0) {
            Py_DECREF(loc);
            return -1;
        }
    } else if (known_text == NULL) {
        PyObject *done = PyErr_Occurred() ? NULL : PyObject_CallMethodOneArg(aliases, s_visit, loc);
        if (done == NULL) {
            Py_DECREF(loc);
            return -1;
        }
        Py_DECREF(done);
    }
    Py_DECREF(loc);
    PyObject *regions = tilebc_slot(op, s_regions, &slot_regions);
    PyObject *iterator = regions == NULL ? NULL : PyObject_GetIter(regions);
    Py_XDECREF(regions);
    if (iterator == NULL)
        return -1;
    int status = 0;
    PyObject *region;
    while (status == 0 && (region = PyIter_Next(iterator)) != NULL) {
        PyObject *blocks = PyObject_GetAttrString(region, "blocks");
        Py_DECREF(region);
        PyObject *each = blocks == NULL ? NULL : PyObject_GetIter(blocks);
        Py_XDECREF(blocks);
        if (each == NULL) {
            status = -1;
            break;
        }
        PyObject *block;
        while (status == 0 && (block = PyIter_Next(each)) != NULL) {
            PyObject *inner = PyObject_GetAttrString(block, "ops");
            Py_DECREF(block);
            status = inner == NULL ? -1 : visit_ops(inner, aliases, known, visiting, depth + 1);
            Py_XDECREF(inner);
        }
        Py_DECREF(each);
    }
    Py_DECREF(iterator);
    return status < 0 || PyErr_Occurred() ? -1 : 0;
}

static int visit_ops(PyObject *ops, PyObject *aliases, PyObject *known, Visiting *visiting,
                     int depth) {
    if (Py_EnterRecursiveCall(" while visiting nested regions") < 0)
        return -1;
    PyObject *sequence = PySequence_Tuple(ops);  /* a copy: visit is Python code */
    int status = sequence == NULL ? -1 : 0;
    for (Py_ssize_t i = 0; status == 0 && i < PySequence_Fast_GET_SIZE(sequence); i++)
        status = visit_op(PySequence_Fast_GET_ITEM(sequence, i), aliases, known, visiting,
                          depth);
    Py_XDECREF(sequence);
    Py_LeaveRecursiveCall();
    return status;
}

static PyObject *visit_locations(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "visit_locations takes 2 or 10 arguments");
        return NULL;
    }
    Visiting visiting, *inline_visit = NULL;
    if (nargs == 10) {  /* depths, then alias_visit's kinds: the visits made here */
        if (!PyDict_CheckExact(args[2])) {
            PyErr_SetString(PyExc_TypeError, "visit_locations: depths must be a dict");
            return NULL;
        }
        for (int i = 4; i < 10; i++) {
            if (!PyType_Check(args[i])) {
                PyErr_SetString(PyExc_TypeError, "visit_locations: the location kinds must be "
                                "types");
                return NULL;
            }
        }
        visiting.depths = args[2];
        visiting.kinds = (AliasKinds){args[3], args[4], args[5], args[6], args[7], args[8],
                                      args[9]};
        inline_visit = &visiting;
    }
    PyObject *known = PyObject_GetAttr(args[1], s_known);
    if (known == NULL)
        return NULL;
    int status = -1;
    if (!PyDict_Check(known))
        PyErr_SetString(PyExc_TypeError, "visit_locations: the aliases' _known is not a dict");
    else
        status = visit_ops(args[0], args[1], known, inline_visit, 0);
    Py_DECREF(known);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef printer_functions[] = {
    {"print_ops", (PyCFunction)(void (*)(void))print_ops, METH_FASTCALL,
     "print_ops(op_text, ops, ctx, indent, printers, refs, aliases, cannot_print) -> str: a "
     "block's ops as the printer's block_body prints them"},
    {"visit_locations", (PyCFunction)(void (*)(void))visit_locations, METH_FASTCALL,
     "visit_locations(ops, aliases[, depths, unknown, *kinds]): aliases.visit(op.loc) for the "
     "ops and those nested in them, in pre-order, but for locations it knows; with depths and "
     "alias_visit's kinds, the visits made in C"},
    {"alias_definitions_text", (PyCFunction)(void (*)(void))alias_definitions_text,
     METH_FASTCALL, "alias_definitions_text(nodes, aliases, names, define, di_loc, escaped) -> "
     "str: LocationAliases.definitions' lines, each with its newline"},
    {"alias_visit_all", (PyCFunction)(void (*)(void))alias_visit_all, METH_FASTCALL,
     "alias_visit_all(locations, depths, unknown, *kinds): LocationAliases._visit of each "
     "location, normalised (visit_distinct)"},
    {"alias_visit", (PyCFunction)(void (*)(void))alias_visit, METH_FASTCALL,
     "alias_visit(depths, node, unknown, di_loc, call_site, subprogram, compile_unit, "
     "lexical_block, unknown_attr) -> depth: LocationAliases._visit"},
    {"number_ops", (PyCFunction)(void (*)(void))number_ops, METH_FASTCALL,
     "number_ops(names, ops, scope, nested, rules, rule_of, sanitize, suggest): name the "
     "results of a block's ops as FunctionNames._number_block does"},
    {NULL, NULL, 0, NULL},
};

int add_printer(PyObject *module) {
    t_is_di_loc = PyUnicode_InternFromString(" = #cuda_tile.di_loc<");
    t_in = PyUnicode_InternFromString(" in ");
    t_close_line = PyUnicode_InternFromString(">\n");
    t_is_loc = PyUnicode_InternFromString(" = loc(");
    t_colon = PyUnicode_InternFromString(":");
    t_paren_line = PyUnicode_InternFromString(")\n");
    t_is = PyUnicode_InternFromString(" = ");
    if (!t_is_di_loc || !t_in || !t_close_line || !t_is_loc || !t_colon || !t_paren_line || !t_is)
        return -1;
    s_groups = PyUnicode_InternFromString("groups");
    s_comma = PyUnicode_InternFromString(", ");
    if (!s_groups || !s_comma)
        return -1;
    s_next_value = PyUnicode_InternFromString("next_value");
    s_next_conflict = PyUnicode_InternFromString("next_conflict");
    s_text = PyUnicode_InternFromString("text");
    s_refs = PyUnicode_InternFromString("refs");
    s_names = PyUnicode_InternFromString("names");
    s_parent = PyUnicode_InternFromString("parent");
    s_regions = PyUnicode_InternFromString("regions");
    s_results = PyUnicode_InternFromString("results");
    s_spec = PyUnicode_InternFromString("spec");
    s_index = PyUnicode_InternFromString("index");
    s_percent = PyUnicode_InternFromString("%");
    s_suggested = PyUnicode_InternFromString("_suggested");
    s_loc = PyUnicode_InternFromString("loc");
    s_mnemonic = PyUnicode_InternFromString("mnemonic");
    s_type_name = PyUnicode_InternFromString("type");
    s_keyword = PyUnicode_InternFromString("keyword");
    s_type_text = PyUnicode_InternFromString("type_text");
    s_texts = PyUnicode_InternFromString("texts");
    s_attribute_texts = PyUnicode_InternFromString("attribute_texts");
    s_printer = PyUnicode_InternFromString("printer");
    s_equals = PyUnicode_InternFromString(" = ");
    s_newline = PyUnicode_InternFromString("\n");
    s_space = PyUnicode_InternFromString(" ");
    s_known = PyUnicode_InternFromString("_known");
    s_ref = PyUnicode_InternFromString("ref");
    s_visit = PyUnicode_InternFromString("visit");
    s_file = PyUnicode_InternFromString("file");
    s_filename = PyUnicode_InternFromString("filename");
    s_line = PyUnicode_InternFromString("line");
    s_column = PyUnicode_InternFromString("column");
    s_scope = PyUnicode_InternFromString("scope");
    s_callee = PyUnicode_InternFromString("callee");
    s_caller = PyUnicode_InternFromString("caller");
    s_compile_unit = PyUnicode_InternFromString("compile_unit");
    if (!s_file || !s_filename || !s_line || !s_column || !s_scope || !s_callee || !s_caller
            || !s_compile_unit)
        return -1;
    s_attrs = PyUnicode_InternFromString("attrs");
    s_operands = PyUnicode_InternFromString("operands");
    s_value = PyUnicode_InternFromString("value");
    s_owner = PyUnicode_InternFromString("_owner");
    if (!s_attrs || !s_operands || !s_value || !s_owner)
        return -1;
    if (!s_next_value || !s_next_conflict || !s_text || !s_refs || !s_names
            || !s_parent || !s_regions || !s_results || !s_spec || !s_index || !s_percent || !s_suggested || !s_loc
            || !s_type_name || !s_keyword || !s_type_text || !s_texts || !s_printer
            || !s_attribute_texts
            || !s_mnemonic || !s_equals || !s_newline || !s_space || !s_known || !s_ref
            || !s_visit)
        return -1;
    /* print_ops takes the Value class as a ninth argument and runs the kinds' body programs */
    if (PyModule_AddIntConstant(module, "PRINT_PROGRAMS", 3) < 0)  /* 2: groups, 3: kept texts */
        return -1;
    return PyModule_AddFunctions(module, printer_functions);
}
