/* SPDX-License-Identifier: Apache-2.0 */
/* A small strict JSON parser (RFC 8259) for stoker-pack's sample sources: JSON-lines samples,
 * schemas, COCO instances files. The whole text is parsed into a tree of values; anything
 * that is not JSON is refused with the byte offset and what was expected: trailing commas,
 * comments, single quotes, leading zeros, lone surrogates, bytes after the value, control
 * characters in strings, invalid UTF-8, a key given twice in an object, arrays and objects
 * nested deeper than JSON_MAX_DEPTH. An integer that fits int64 reads exactly (is_int, integer)
 * besides its double.
 * Strings are UTF-8, NUL-terminated; one holding an escaped NUL is refused (no name or path
 * needs one). */
#ifndef STOKER_PACK_JSON_H
#define STOKER_PACK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    bool boolean;
    double number;
    bool is_int; /* a number without fraction or exponent that fits int64 */
    int64_t integer;
    char *string;      /* JSON_STRING */
    size_t n;          /* elements of an array, members of an object */
    json_value *items; /* array elements, object member values */
    char **keys;       /* object member names, in the text's order */
};

/* Parses `text` (size bytes; need not be NUL-terminated) into *out. Returns 0, or -1 with
 * the reason in msg ("byte 17: expected ',' or '}' in an object"). Free with json_free. */
int json_parse(const char *text, size_t size, json_value *out, char *msg, size_t msgcap);
void json_free(json_value *v);

/* The member `key` of an object, or NULL (also when v is not an object). */
const json_value *json_get(const json_value *v, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object" */
const char *json_type_name(json_type t);

#endif
