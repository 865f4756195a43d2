/* The ContextOS reference chain's hot loop, compiled (seed 004's verifyChain).
 *
 * Why C: the reference rule hashes, for every chain entry, JSON.stringify(payload,
 * Object.keys(payload).sort()) -- the array replacer keeps only keys spelt like the payload's
 * own top-level keys, at every depth -- and a trace of small files spends its time in the
 * Python glue around that (a dict lookup, a small copy, orjson.dumps, a hash per entry), not
 * in the work itself. No JSON library writes "only these keys, at any depth, in this order",
 * so this file does, over values a JSON reader already built (no text is parsed here).
 *
 * What it writes is the exact writer's output (contextos.py's _fused_write: keys in the
 * allow-list's order, JSON.stringify's string escapes, integers in the safe range in decimal,
 * other numbers through the Python function the exact writer uses), and the pointers the
 * allow-list leaves out are added to a set as the exact writer adds them. Anything it does
 * not handle -- a string with a surrogate code point, a value JSON has no name for, a key
 * that is not a string -- raises Slow, and the caller takes the Python writer. Hashes are
 * OpenSSL's (EVP, the digest fetched once) when the build found its header (setup.py), else
 * hashlib's through the C API. The tests hold both writers to the same bytes, pointers and hashes on generated and
 * hostile values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#ifdef HAVE_OPENSSL_SHA
#include <openssl/evp.h>
static EVP_MD *sha256_md;      /* fetched once: SHA256() would fetch it on every call */
static EVP_MD_CTX *sha256_ctx; /* reused: only hash_into touches it, holding the GIL */
#endif

static PyObject *Slow;         /* raised for what the Python writer must decide */
static PyObject *js_number;    /* core.canonical._js_number */
static PyObject *pointer_part; /* contextos._pointer_part */
static PyObject *sha256;       /* hashlib.sha256 */
static PyObject *kinds;        /* per entry kind: (plist, allowed, pieces); see configure */
static PyObject *str_payload_hash, *str_star_suffix, *str_digest, *str_parts[2];

#define SAFE_INT 9007199254740992LL /* 2**53 */
#define CACHE_MAX 4096              /* pointers kept per level, and levels kept */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int
buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

/* JSON.stringify's quoting (json.encoder.encode_basestring: \" \\ \b \f \n \r \t, other
 * controls \u00xx, everything else raw UTF-8); Slow for a surrogate code point. */
static int
write_str(Buf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_SetString(Slow, "a surrogate code point");
        }
        return -1;
    }
    Py_ssize_t extra = 0; /* what the escapes add: reserved exactly, never 6x a long string */
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c < 0x20 || c == '"' || c == '\\')
            extra += (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' ||
                      c == '\r' || c == '\t')
                         ? 1
                         : 5;
    }
    if (buf_reserve(b, n + extra + 2) < 0)
        return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        default: {
            static const char hex[] = "0123456789abcdef";
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = hex[c >> 4];
            *out++ = hex[c & 15];
        }
        }
    }
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

static int
write_ascii(Buf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    return u == NULL ? -1 : buf_put(b, u, n);
}

typedef struct {
    PyObject *plist;   /* tuple of str: the allow-list, in its order */
    PyObject *allowed; /* frozenset of the same */
    PyObject *sink;    /* set the left-out pointers go to, or NULL */
    PyObject *cache;   /* {pointer: {key: pointer below it}}, or NULL */
    Py_ssize_t limit;  /* no pointer is added to a sink already holding more than this */
} Walk;

/* The pointer below ``at`` for ``key``: "at/key" for a kept key, "at/<escaped key>" for one
 * left out (as the Python writer spells them), "at" + "/" + "*" for an array's items (key NULL);
 * new reference. Kept in the cache, per level, up to CACHE_MAX each. */
static PyObject *
below(Walk *w, PyObject *at, PyObject *key, int dropped)
{
    /* a strong reference: pointer_part is Python code, which may empty the cache */
    PyObject *level = NULL;
    if (w->cache != NULL) {
        level = Py_XNewRef(PyDict_GetItemWithError(w->cache, at));
        if (level == NULL) {
            if (PyErr_Occurred())
                return NULL;
            if (PyDict_GET_SIZE(w->cache) < CACHE_MAX) {
                level = PyDict_New();
                if (level == NULL || PyDict_SetItem(w->cache, at, level) < 0) {
                    Py_XDECREF(level);
                    return NULL;
                }
            }
        }
    }
    PyObject *name = key == NULL ? Py_None : key; /* None: no key spells it */
    if (level != NULL) {
        PyObject *hit = PyDict_GetItemWithError(level, name);
        if (hit != NULL) {
            Py_DECREF(level);
            return Py_NewRef(hit);
        }
        if (PyErr_Occurred()) {
            Py_DECREF(level);
            return NULL;
        }
    }
    PyObject *made;
    if (key == NULL) {
        made = PyUnicode_Concat(at, str_star_suffix);
    }
    else if (dropped) {
        PyObject *part = PyObject_CallOneArg(pointer_part, key);
        made = part == NULL ? NULL : PyUnicode_FromFormat("%U/%U", at, part);
        Py_XDECREF(part);
    }
    else {
        made = PyUnicode_FromFormat("%U/%U", at, key);
    }
    if (made != NULL && level != NULL && PyDict_GET_SIZE(level) < CACHE_MAX &&
        PyDict_SetItem(level, name, made) < 0) {
        Py_CLEAR(made);
    }
    Py_XDECREF(level);
    return made;
}

static int write_value(Buf *b, PyObject *o, PyObject *at, Walk *w);

static int
write_dict(Buf *b, PyObject *o, PyObject *at, Walk *w)
{
    if (at != NULL && w->sink != NULL) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                PyErr_SetString(Slow, "a key that is not a string");
                return -1;
            }
            if (PySet_GET_SIZE(w->sink) > w->limit)
                continue; /* enough to say (the keys are still checked) */
            int kept = PySet_Contains(w->allowed, key);
            if (kept < 0)
                return -1;
            if (!kept) {
                /* held: below() runs Python code (pointer_part), which may change o */
                Py_INCREF(key);
                PyObject *pointer = below(w, at, key, 1);
                Py_DECREF(key);
                if (pointer == NULL)
                    return -1;
                int added = PySet_Add(w->sink, pointer);
                Py_DECREF(pointer);
                if (added < 0)
                    return -1;
            }
        }
    }
    if (buf_put(b, "{", 1) < 0)
        return -1;
    int first = 1;
    Py_ssize_t n = PyTuple_GET_SIZE(w->plist);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(w->plist, i);
        /* a strong reference: writing v runs Python code (js_number, pointer_part), which
         * may take v out of o (a borrowed v would then be freed while it is written) */
        PyObject *v = Py_XNewRef(PyDict_GetItemWithError(o, k));
        if (v == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        int done = -1;
        PyObject *sub = NULL;
        if ((first || buf_put(b, ",", 1) == 0) && write_str(b, k) == 0 &&
            buf_put(b, ":", 1) == 0 && (at == NULL || (sub = below(w, at, k, 0)) != NULL))
            done = write_value(b, v, sub, w);
        first = 0;
        Py_XDECREF(sub);
        Py_DECREF(v);
        if (done < 0)
            return -1;
    }
    return buf_put(b, "}", 1);
}

static int
write_list(Buf *b, PyObject *o, PyObject *at, Walk *w)
{
    PyObject *inner = NULL;
    if (at != NULL && (inner = below(w, at, NULL, 0)) == NULL)
        return -1;
    int failed = buf_put(b, "[", 1) < 0;
    /* the list may not change under us: nothing here runs Python code that could hold it,
     * but read its size each time all the same */
    for (Py_ssize_t i = 0; !failed && i < PyList_GET_SIZE(o); i++) {
        PyObject *item = PyList_GET_ITEM(o, i);
        Py_INCREF(item);
        failed = (i && buf_put(b, ",", 1) < 0) || write_value(b, item, inner, w) < 0;
        Py_DECREF(item);
    }
    Py_XDECREF(inner);
    return failed || buf_put(b, "]", 1) < 0 ? -1 : 0;
}

static int
write_number(Buf *b, PyObject *o)
{
    PyObject *text = PyObject_CallOneArg(js_number, o);
    if (text == NULL)
        return -1;
    int done = PyUnicode_Check(text) ? write_ascii(b, text) : (PyErr_SetString(Slow, "number"), -1);
    Py_DECREF(text);
    return done;
}

static int
write_value(Buf *b, PyObject *o, PyObject *at, Walk *w)
{
    if (PyUnicode_CheckExact(o))
        return write_str(b, o);
    if (o == Py_None)
        return buf_put(b, "null", 4);
    if (o == Py_True)
        return buf_put(b, "true", 4);
    if (o == Py_False)
        return buf_put(b, "false", 5);
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow && -SAFE_INT <= v && v <= SAFE_INT) {
            char digits[32];
            int n = snprintf(digits, sizeof digits, "%lld", v);
            return buf_put(b, digits, n);
        }
        return write_number(b, o);
    }
    if (PyFloat_CheckExact(o))
        return write_number(b, o);
    if (PyDict_CheckExact(o) || PyList_CheckExact(o)) {
        if (Py_EnterRecursiveCall(" while writing a ContextOS chain entry"))
            return -1;
        int done = PyDict_CheckExact(o) ? write_dict(b, o, at, w) : write_list(b, o, at, w);
        Py_LeaveRecursiveCall();
        return done;
    }
    PyErr_Format(Slow, "%s is not a JSON value", Py_TYPE(o)->tp_name);
    return -1;
}

static int
check_plist(PyObject *plist, PyObject *allowed)
{
    if (!PyTuple_CheckExact(plist) || !PyFrozenSet_CheckExact(allowed)) {
        PyErr_SetString(PyExc_TypeError, "the allow-list: a tuple and a frozenset");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plist); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(plist, i))) {
            PyErr_SetString(PyExc_TypeError, "the allow-list holds strings");
            return -1;
        }
    }
    return 0;
}

/* sink and cache: a set and a dict, or both None (nothing collected) */
static int
collecting(PyObject **sink, PyObject **cache)
{
    *sink = *sink == Py_None ? NULL : *sink;
    *cache = *cache == Py_None ? NULL : *cache;
    if ((*sink != NULL && !PySet_CheckExact(*sink)) ||
        (*cache != NULL && !PyDict_CheckExact(*cache)) || ((*sink == NULL) != (*cache == NULL))) {
        PyErr_SetString(PyExc_TypeError, "sink: a set and cache: a dict, or both None");
        return -1;
    }
    return 0;
}

static int
configured(void)
{
    if (kinds == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_compiled: configure() first");
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(write_kept_doc,
"write_kept(value, plist, allowed, at, sink, cache) -> bytes\n\n"
"JSON.stringify(value, plist) for a value a JSON reader built (plist: the allow-list, in its\n"
"order; allowed: the same as a frozenset); the pointers below ``at`` that the allow-list\n"
"leaves out added to ``sink`` (``at``, ``sink`` and ``cache`` None: none collected). Raises\n"
"Slow for what the Python writer must decide.");

static PyObject *
write_kept(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "write_kept takes 6 arguments");
        return NULL;
    }
    if (!configured() || check_plist(args[1], args[2]) < 0)
        return NULL;
    Walk w = {args[1], args[2], args[4], args[5], PY_SSIZE_T_MAX};
    PyObject *at = args[3] == Py_None ? NULL : args[3];
    if (collecting(&w.sink, &w.cache) < 0)
        return NULL;
    if ((at == NULL) != (w.sink == NULL) || (at != NULL && !PyUnicode_CheckExact(at))) {
        PyErr_SetString(PyExc_TypeError, "at: a str with a sink, None without");
        return NULL;
    }
    Buf b = {NULL, 0, 0};
    PyObject *out = NULL;
    if (write_value(&b, args[0], at, &w) == 0)
        out = PyBytes_FromStringAndSize(b.data, b.len);
    PyMem_Free(b.data);
    return out;
}

#define HASH_LEN 71 /* "sha256:" and 64 hex digits */

/* "sha256:" + hex(sha256(data)) into out[HASH_LEN] */
static int
hash_into(const char *data, Py_ssize_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[32];
#ifdef HAVE_OPENSSL_SHA
    unsigned int size = 0;
    if (!EVP_DigestInit_ex(sha256_ctx, sha256_md, NULL) ||
        !EVP_DigestUpdate(sha256_ctx, data, (size_t)n) ||
        !EVP_DigestFinal_ex(sha256_ctx, d, &size) || size != 32) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
        return -1;
    }
#else
    PyObject *bytes = PyBytes_FromStringAndSize(data, n);
    if (bytes == NULL)
        return -1;
    PyObject *h = PyObject_CallOneArg(sha256, bytes);
    Py_DECREF(bytes);
    if (h == NULL)
        return -1;
    PyObject *digest = PyObject_CallMethodNoArgs(h, str_digest);
    Py_DECREF(h);
    if (digest == NULL)
        return -1;
    if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) != 32) {
        Py_DECREF(digest);
        PyErr_SetString(PyExc_ValueError, "sha256 digest");
        return -1;
    }
    memcpy(d, PyBytes_AS_STRING(digest), 32);
    Py_DECREF(digest);
#endif
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < 32; i++) {
        out[7 + 2 * i] = hex[d[i] >> 4];
        out[8 + 2 * i] = hex[d[i] & 15];
    }
    return 0;
}

PyDoc_STRVAR(hash_kept_doc,
"hash_kept(value, plist, allowed) -> str\n\n"
"\"sha256:\" + hex(sha256(write_kept(value, plist, allowed, None, None, None))).");

static PyObject *
hash_kept(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "hash_kept takes 3 arguments");
        return NULL;
    }
    if (!configured() || check_plist(args[1], args[2]) < 0)
        return NULL;
    Walk w = {args[1], args[2], NULL, NULL, PY_SSIZE_T_MAX};
    Buf b = {NULL, 0, 0};
    char hashed[HASH_LEN];
    PyObject *out = NULL;
    if (write_value(&b, args[0], NULL, &w) == 0 && hash_into(b.data, b.len, hashed) == 0)
        out = PyUnicode_FromStringAndSize(hashed, HASH_LEN);
    PyMem_Free(b.data);
    return out;
}

/* The chain entry of kind k (0 invoke, 1 tool_call, 2 tool_result, 3 decision_record) with
 * its payload's values (a tuple, in the order of the kind's pieces that name a key): the
 * bytes the reference rule hashes, after ``prev``, into b. -1 with Slow (or another error). */
static int
write_entry(Buf *b, int k, const char *prev, Py_ssize_t prev_len, PyObject *const *values,
            PyObject *sink, PyObject *cache, Py_ssize_t limit)
{
    /* held: configure() (Python code may call it meanwhile) replaces the kinds */
    PyObject *kind = Py_NewRef(PyTuple_GET_ITEM(kinds, k));
    Walk w = {PyTuple_GET_ITEM(kind, 0), PyTuple_GET_ITEM(kind, 1), sink, cache, limit};
    PyObject *pieces = PyTuple_GET_ITEM(kind, 2);
    int failed = 0;
    b->len = 0;
    if (buf_put(b, prev, prev_len) < 0)
        failed = 1;
    int v = 0;
    for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(pieces); i++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, i); /* (bytes before, pointer or None) */
        PyObject *before = PyTuple_GET_ITEM(piece, 0);
        if (buf_put(b, PyBytes_AS_STRING(before), PyBytes_GET_SIZE(before)) < 0) {
            failed = 1;
            break;
        }
        PyObject *at = PyTuple_GET_ITEM(piece, 1);
        if (at == Py_None)
            continue;
        if (write_value(b, values[v++], sink == NULL ? NULL : at, &w) < 0)
            failed = 1;
    }
    Py_DECREF(kind);
    return failed ? -1 : 0;
}

enum { CHAIN_DONE = 0, CHAIN_BROKE = 1, CHAIN_SLOW = 2, CHAIN_FULL = 3 };

PyDoc_STRVAR(chain_doc,
"chain(run_context, request, envelope_hash, envelopes, record, chain_prev_hash, start, stop,\n"
"      prev, sink, limit, cache) -> (state, position, prev, done, computed, recorded)\n\n"
"verifyChain's entries under the reference rule from position ``start`` to ``stop``,\n"
"chained from ``prev`` (bytes: the hash before ``start``, b\"\" for none). Positions: 0 the\n"
"invoke entry, 1 + 2*i and 2 + 2*i envelope i's tool_call and tool_result, 1 + 2*n the\n"
"decision_record (n: len(envelopes); a run of a longer trace's envelopes gives positions\n"
"that stop before its record). ``sink``: the set the left-out pointers go to (with\n"
"``cache``), or None with ``cache`` None. state 0: all verified, ``prev`` the last hash,\n"
"``position`` == stop; 1: the entry at ``position`` does not verify (computed, recorded);\n"
"2: it needs the Python writer (``prev``: the hash before it; ``sink`` may hold some of its\n"
"pointers, a subset of what the Python writer adds); 3: the sink passed ``limit`` after the\n"
"entry before ``position``, which verified: go on without collecting. ``done``: entries\n"
"this call verified.");

static PyObject *
chain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "chain takes 12 arguments");
        return NULL;
    }
    if (!configured())
        return NULL;
    PyObject *envelopes = args[3], *prev_in = args[8], *sink = args[9], *cache = args[11];
    PyObject *recorded_of[2] = {args[2], args[5]}; /* invoke, record */
    Py_ssize_t start = PyLong_AsSsize_t(args[6]), stop = PyLong_AsSsize_t(args[7]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[10]);
    if (PyErr_Occurred() || collecting(&sink, &cache) < 0)
        return NULL;
    if (!PyList_CheckExact(envelopes) || !PyBytes_CheckExact(prev_in) || start < 0) {
        PyErr_SetString(PyExc_TypeError, "chain: envelopes a list, prev bytes, start >= 0");
        return NULL;
    }
    char prev[HASH_LEN], computed[HASH_LEN];
    Py_ssize_t prev_len = PyBytes_GET_SIZE(prev_in);
    if (prev_len != 0 && prev_len != HASH_LEN) {
        PyErr_SetString(PyExc_ValueError, "prev: b\"\" or a sha256: hash");
        return NULL;
    }
    memcpy(prev, PyBytes_AS_STRING(prev_in), prev_len);
    Py_ssize_t last = 1 + 2 * PyList_GET_SIZE(envelopes); /* the record's position */
    if (stop > last + 1)
        stop = last + 1;
    Buf b = {NULL, 0, 0};
    int state = CHAIN_DONE;
    Py_ssize_t position = start, done = 0;
    PyObject *computed_out = NULL, *recorded_out = NULL;
    for (; position < stop; position++) {
        PyObject *values[2] = {args[0], args[1]}; /* the invoke's; else set below */
        PyObject *body = NULL, *recorded;
        int k;
        if (position == 0) {
            k = 0;
            recorded = recorded_of[0];
        }
        else if (position == last) {
            k = 3;
            values[0] = args[4];
            recorded = recorded_of[1];
        }
        else {
            int part = (int)((position - 1) % 2);
            if ((position - 1) / 2 >= PyList_GET_SIZE(envelopes)) {
                state = CHAIN_SLOW; /* the list changed under us: the Python loop decides */
                break;
            }
            PyObject *env = PyList_GET_ITEM(envelopes, (position - 1) / 2);
            k = 1 + part;
            body = PyDict_CheckExact(env) ? PyDict_GetItemWithError(env, str_parts[part]) : NULL;
            if (body == NULL && PyErr_Occurred())
                goto error;
            if (body == NULL || !PyDict_CheckExact(body)) {
                state = CHAIN_SLOW; /* the reader refuses it: the Python writer words it */
                break;
            }
            values[0] = body;
            recorded = PyDict_GetItemWithError(body, str_payload_hash);
            if (recorded == NULL && PyErr_Occurred())
                goto error;
        }
        if (recorded != NULL && recorded != Py_None && !PyUnicode_CheckExact(recorded)) {
            state = CHAIN_SLOW;
            break;
        }
        /* held while the values are written: Python code (js_number) runs meanwhile */
        Py_XINCREF(body);
        Py_XINCREF(recorded);
        int written = write_entry(&b, k, prev, prev_len, values, sink, cache, limit);
        Py_XDECREF(body);
        if (written < 0 || hash_into(b.data, b.len, computed) < 0) {
            Py_XDECREF(recorded);
            if (written < 0 && (PyErr_ExceptionMatches(Slow) ||
                                PyErr_ExceptionMatches(PyExc_RecursionError))) {
                PyErr_Clear();
                state = CHAIN_SLOW;
                break;
            }
            goto error;
        }
        Py_ssize_t rlen = 0;
        const char *r = "";
        if (recorded != NULL && recorded != Py_None) {
            r = PyUnicode_AsUTF8AndSize(recorded, &rlen);
            if (r == NULL) {
                PyErr_Clear(); /* a surrogate code point: it cannot equal a hash */
                rlen = -1;
            }
        }
        if (rlen != HASH_LEN || memcmp(r, computed, HASH_LEN) != 0) {
            state = CHAIN_BROKE;
            computed_out = PyUnicode_FromStringAndSize(computed, HASH_LEN);
            if (recorded == NULL || recorded == Py_None)
                recorded_out = PyUnicode_FromStringAndSize("", 0); /* ?? "" */
            else
                recorded_out = Py_NewRef(recorded);
            Py_XDECREF(recorded);
            if (computed_out == NULL || recorded_out == NULL)
                goto error;
            break;
        }
        Py_XDECREF(recorded);
        memcpy(prev, computed, HASH_LEN);
        prev_len = HASH_LEN;
        done++;
        if (sink != NULL && PySet_GET_SIZE(sink) > limit) {
            state = CHAIN_FULL;
            position++; /* the next entry: this one verified */
            break;
        }
    }
    PyMem_Free(b.data);
    if (computed_out == NULL)
        computed_out = Py_NewRef(Py_None);
    if (recorded_out == NULL)
        recorded_out = Py_NewRef(Py_None);
    return Py_BuildValue("(inNnNN)", state, position, PyBytes_FromStringAndSize(prev, prev_len),
                         done, computed_out, recorded_out);
error:
    PyMem_Free(b.data);
    Py_XDECREF(computed_out);
    Py_XDECREF(recorded_out);
    return NULL;
}

PyDoc_STRVAR(configure_doc,
"configure(js_number, pointer_part, sha256, kinds)\n\n"
"The Python functions the writer calls, and per entry kind (invoke, tool_call, tool_result,\n"
"decision_record) its (plist, allowed, pieces): pieces (bytes before, pointer or None) in\n"
"order, a pointer naming where the payload's next value is written.");

static PyObject *
configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "configure takes 4 arguments");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (!PyCallable_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: three callables, then the kinds");
            return NULL;
        }
    }
    PyObject *spec = args[3];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 4)
        goto bad;
    for (Py_ssize_t k = 0; k < 4; k++) {
        PyObject *kind = PyTuple_GET_ITEM(spec, k);
        if (!PyTuple_CheckExact(kind) || PyTuple_GET_SIZE(kind) != 3)
            goto bad;
        if (check_plist(PyTuple_GET_ITEM(kind, 0), PyTuple_GET_ITEM(kind, 1)) < 0)
            return NULL;
        PyObject *pieces = PyTuple_GET_ITEM(kind, 2);
        if (!PyTuple_CheckExact(pieces))
            goto bad;
        Py_ssize_t named = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pieces); i++) {
            PyObject *piece = PyTuple_GET_ITEM(pieces, i);
            if (!PyTuple_CheckExact(piece) || PyTuple_GET_SIZE(piece) != 2 ||
                !PyBytes_CheckExact(PyTuple_GET_ITEM(piece, 0)))
                goto bad;
            PyObject *at = PyTuple_GET_ITEM(piece, 1);
            if (at != Py_None) {
                if (!PyUnicode_CheckExact(at))
                    goto bad;
                named++;
            }
        }
        if (named != (k == 0 ? 2 : 1)) /* the invoke writes two values, the others one */
            goto bad;
    }
    Py_XSETREF(js_number, Py_NewRef(args[0]));
    Py_XSETREF(pointer_part, Py_NewRef(args[1]));
    Py_XSETREF(sha256, Py_NewRef(args[2]));
    Py_XSETREF(kinds, Py_NewRef(spec));
    Py_RETURN_NONE;
bad:
    PyErr_SetString(PyExc_TypeError, "configure: four kinds of (plist, allowed, pieces)");
    return NULL;
}

/* 1 when a container in o (at level ``depth``) is deeper than ``limit``, else 0; the
 * recursion stops at the limit, so it never goes deeper than limit - depth + 1 frames. No
 * Python code runs: the values cannot change under it. */
static int
deeper(PyObject *o, Py_ssize_t depth, Py_ssize_t limit)
{
    if (depth > limit)
        return 1;
    if (PyDict_CheckExact(o)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &key, &value)) {
            if ((PyDict_CheckExact(value) || PyList_CheckExact(value)) &&
                deeper(value, depth + 1, limit))
                return 1;
        }
    }
    else {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) {
            PyObject *item = PyList_GET_ITEM(o, i);
            if ((PyDict_CheckExact(item) || PyList_CheckExact(item)) &&
                deeper(item, depth + 1, limit))
                return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(deeper_than_doc,
"deeper_than(value, limit, depth) -> bool\n\n"
"Whether ``value`` (at level ``depth``) holds a dict or list deeper than ``limit`` levels\n"
"(only dicts and lists are followed, as a JSON reader builds them; ``limit`` at most 1000).");

static PyObject *
deeper_than(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "deeper_than takes 3 arguments");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]), depth = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (limit < 0 || limit > 1000 || depth < 1) {
        PyErr_SetString(PyExc_ValueError, "deeper_than: 0 <= limit <= 1000, depth >= 1");
        return NULL;
    }
    PyObject *o = args[0];
    if (!PyDict_CheckExact(o) && !PyList_CheckExact(o))
        Py_RETURN_FALSE;
    return PyBool_FromLong(deeper(o, depth, limit));
}

static PyMethodDef methods[] = {
    {"deeper_than", (PyCFunction)(void (*)(void))deeper_than, METH_FASTCALL, deeper_than_doc},
    {"write_kept", (PyCFunction)(void (*)(void))write_kept, METH_FASTCALL, write_kept_doc},
    {"hash_kept", (PyCFunction)(void (*)(void))hash_kept, METH_FASTCALL, hash_kept_doc},
    {"chain", (PyCFunction)(void (*)(void))chain, METH_FASTCALL, chain_doc},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_compiled",
    "The ContextOS reference chain's hot loop, compiled (see the source's header).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__compiled(void)
{
#ifdef HAVE_OPENSSL_SHA
    if (sha256_md == NULL) {
        sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
        sha256_ctx = EVP_MD_CTX_new();
        if (sha256_md == NULL || sha256_ctx == NULL) {
            PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
            return NULL;
        }
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Slow = PyErr_NewException("_compiled.Slow", NULL, NULL);
    str_payload_hash = PyUnicode_InternFromString("payload_hash");
    str_star_suffix = PyUnicode_InternFromString("/*");
    str_digest = PyUnicode_InternFromString("digest");
    str_parts[0] = PyUnicode_InternFromString("call");
    str_parts[1] = PyUnicode_InternFromString("result");
    if (Slow == NULL || str_payload_hash == NULL || str_star_suffix == NULL ||
        str_digest == NULL || str_parts[0] == NULL || str_parts[1] == NULL ||
        PyModule_AddObjectRef(m, "Slow", Slow) < 0 ||
        PyModule_AddIntConstant(m, "OPENSSL_SHA256",
#ifdef HAVE_OPENSSL_SHA
                                1
#else
                                0
#endif
                                ) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
