/* SPDX-License-Identifier: Apache-2.0 */
/* --jsonl FILE --schema FILE: one sample per line of a JSON-lines file, an object whose
 * members are the schema's fields (README.md, "stoker-pack"):
 *   - jpeg, png: a path, relative to the JSONL file's folder (or absolute); also {"path": P};
 *   - bytes: a string (its UTF-8 bytes), or {"path": P} (the file's bytes);
 *   - int64, float32: a number; raw: nested lists of its shape; array: a list of rows;
 *   - "key": the record's key (a string), unless the schema has a field named key; without
 *     it the key is the line number.
 * Blank lines are passed over. A member that is not a field, a field missing or of another
 * type, a line that is not a JSON object: the sample is bad (an error, or with --skip-bad left
 * out and counted). */
#include "fields.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pack_schema_load(const char *path, pack_schema *s)
{
    json_value v = {0};
    if (pack_read_json(path, "schema", &v) < 0)
        return -1;
    const int rc = pack_schema_parse(&v, path, s);
    json_free(&v);
    return rc;
}

/* A path value: a string, or an object {"path": STRING}. */
static const char *path_of(const json_value *m)
{
    if (m->type == JSON_STRING)
        return m->string;
    const json_value *p = m->type == JSON_OBJECT && m->n == 1 ? json_get(m, "path") : NULL;
    return p && p->type == JSON_STRING ? p->string : NULL;
}

/* One field's value from member m; 0, or -1 with the reason in why. */
static int field_value(const stoker_field_desc *f, const json_value *m, const char *dir,
                       pack_value *v, char *why, size_t cap)
{
    const bool image = f->kind == STOKER_FIELD_JPEG || f->kind == STOKER_FIELD_PNG;
    const char *path =
        image || (f->kind == STOKER_FIELD_BYTES && m->type == JSON_OBJECT) ? path_of(m) : NULL;
    if (path && *path)
        return pack_value_file(v, dir, path) < 0 ? (snprintf(why, cap, "out of memory"), -1) : 0;
    if (image || f->kind == STOKER_FIELD_BYTES) {
        if (image || m->type == JSON_OBJECT) {
            snprintf(why, cap, "expected a file's path (a string, or {\"path\": STRING}), found %s",
                     m->type == JSON_STRING ? "an empty string" : json_type_name(m->type));
            return -1;
        }
    }
    return pack_value_from_json(f, m, v, why, cap);
}

/* Names the members of obj that are no field (nor "key" where that is no field) in why. */
static bool unknown_members(const pack_schema *sc, const json_value *obj, bool key_field, char *why,
                            size_t cap)
{
    char names[768] = "";
    size_t len = 0, found = 0;
    for (size_t i = 0; i < obj->n; i++) {
        const char *k = obj->keys[i];
        if (pack_schema_find(sc, k) >= 0 || (!key_field && strcmp(k, "key") == 0))
            continue;
        if (len < sizeof names)
            len +=
                (size_t)snprintf(names + len, sizeof names - len, "%s'%s'", found ? ", " : "", k);
        found++;
    }
    if (found)
        snprintf(why, cap, "member%s %s %s not in the schema", found > 1 ? "s" : "", names,
                 found > 1 ? "are" : "is");
    return found > 0;
}

/* One line: a sample, or a bad one (pack_samples_bad). 0 or an exit code. */
static int take_line(const pack_opts *o, pack_samples *ss, const char *text, size_t size,
                     size_t lineno, const char *dir)
{
    char where[600], why[1024], msg[256];
    snprintf(where, sizeof where, "%s: line %zu", o->jsonl, lineno);
    json_value obj = {0};
    if (json_parse(text, size, &obj, msg, sizeof msg) < 0) {
        snprintf(why, sizeof why, "not JSON: %s", msg);
        return pack_samples_bad(o, ss, where, why);
    }
    const pack_schema *sc = &ss->schema;
    const bool key_field = pack_schema_find(sc, "key") >= 0;
    const json_value *key = key_field ? NULL : json_get(&obj, "key");
    char keybuf[32];
    snprintf(keybuf, sizeof keybuf, "%zu", lineno);
    int rc = 0;
    why[0] = '\0';
    if (obj.type != JSON_OBJECT)
        snprintf(why, sizeof why, "expected an object of the schema's fields, found %s",
                 json_type_name(obj.type));
    else if (key && key->type != JSON_STRING)
        snprintf(why, sizeof why, "\"key\" must be a string, found %s", json_type_name(key->type));
    else if (!unknown_members(sc, &obj, key_field, why, sizeof why)) {
        pack_sample *s = pack_samples_add(ss, where, key ? key->string : keybuf);
        if (!s) {
            json_free(&obj);
            cli_err("out of memory");
            return PACK_FAIL;
        }
        for (int32_t i = 0; i < sc->n && !why[0]; i++) {
            const json_value *m = json_get(&obj, sc->names[i]);
            char r[768];
            if (!m)
                snprintf(why, sizeof why, "field \"%s\": missing", sc->names[i]);
            else if (field_value(&sc->f[i], m, dir, &s->v[i], r, sizeof r) < 0)
                snprintf(why, sizeof why, "field \"%s\": %s", sc->names[i], r);
        }
    }
    if (why[0])
        rc = pack_samples_bad(o, ss, where, why);
    json_free(&obj);
    return rc;
}

int pack_jsonl_load(const pack_opts *o, pack_samples *ss)
{
    if (pack_schema_load(o->schema, &ss->schema) < 0)
        return PACK_FAIL;
    size_t size = 0;
    char *text = pack_read_text(o->jsonl, &size);
    if (!text) {
        cli_err("%s: %s", o->jsonl, strerror(errno));
        return PACK_FAIL;
    }
    char *dir = strdup(o->jsonl);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (dir)
        slash ? (void)(slash[slash == dir ? 1 : 0] = '\0') : (void)(dir[0] = '\0');
    int rc = dir ? 0 : PACK_FAIL;
    size_t lineno = 0;
    for (size_t at = 0; rc == 0 && at < size;) {
        const char *nl = memchr(text + at, '\n', size - at);
        const size_t end = nl ? (size_t)(nl - text) : size;
        lineno++;
        size_t b = at;
        while (b < end && (text[b] == ' ' || text[b] == '\t' || text[b] == '\r'))
            b++;
        if (b < end)
            rc = take_line(o, ss, text + at, end - at, lineno, dir);
        at = end + 1;
    }
    free(dir);
    free(text);
    ss->source = "JSON lines";
    ss->schema_from = o->schema;
    return rc;
}
