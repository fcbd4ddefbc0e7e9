/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's JSON parser (tools/pack/json.c): what it reads, and every kind of text that is
 * not JSON refused with the byte and the reason. */
#include "json.h"

#include "testutil.h"

static json_value parse_ok(const char *text)
{
    json_value v;
    char msg[200] = "";
    if (json_parse(text, strlen(text), &v, msg, sizeof msg) != 0)
        T_FAIL("'%s': %s", text, msg);
    return v;
}

static void refused(const char *text, size_t size, const char *why)
{
    json_value v;
    char msg[200] = "";
    if (json_parse(text, size, &v, msg, sizeof msg) == 0)
        T_FAIL("'%s' was accepted", text);
    T_CONTAINS(msg, why);
}

#define REFUSED(text, why) refused(text, sizeof(text) - 1, why)

static void test_values(void)
{
    json_value v = parse_ok(" {\"image\": \"a/b.jpg\", \"boxes\": [[0, 1.5, 2e1, -3]],"
                            " \"label\": 9007199254740993, \"ok\": true, \"none\": null,"
                            " \"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"\"} ");
    T_EQ_INT(v.type, JSON_OBJECT);
    T_EQ_INT(v.n, 6);
    T_EQ_STR(json_get(&v, "image")->string, "a/b.jpg");
    const json_value *b = json_get(&v, "boxes");
    T_EQ_INT(b->type, JSON_ARRAY);
    T_EQ_INT(b->items[0].n, 4);
    T_ASSERT(b->items[0].items[1].number == 1.5 && !b->items[0].items[1].is_int);
    T_ASSERT(b->items[0].items[2].number == 20.0 && !b->items[0].items[2].is_int);
    T_ASSERT(b->items[0].items[3].is_int && b->items[0].items[3].integer == -3);
    /* an integer beyond a double's 2^53 reads exactly */
    T_ASSERT(json_get(&v, "label")->is_int);
    T_EQ_INT(json_get(&v, "label")->integer, 9007199254740993LL);
    T_ASSERT(json_get(&v, "ok")->boolean);
    T_EQ_INT(json_get(&v, "none")->type, JSON_NULL);
    T_EQ_STR(json_get(&v, "s")->string, "\xC3\xA9\xF0\x9F\x98\x80\n\"");
    T_ASSERT(json_get(&v, "missing") == NULL);
    json_free(&v);
    v = parse_ok("99999999999999999999"); /* past int64: a number, not an integer */
    T_ASSERT(!v.is_int && v.number > 9e19);
    json_free(&v);
    v = parse_ok("[]");
    T_EQ_INT(v.n, 0);
    json_free(&v);
}

static void test_refusals(void)
{
    REFUSED("", "ends where a value");
    REFUSED("{\"a\": 1,}", "expected a member's name");
    REFUSED("[1, 2,]", "expected a value");
    REFUSED("{\"a\": 1} x", "bytes after the value");
    REFUSED("{\"a\": 1, \"a\": 2}", "the key \"a\" twice");
    REFUSED("['a']", "expected a value");
    REFUSED("[01]", "leading zero");
    REFUSED("[1.]", "decimal point");
    REFUSED("[1e]", "exponent");
    REFUSED("\"a\tb\"", "control character");
    REFUSED("\"\\x\"", "unknown escape");
    REFUSED("\"\\ud800\"", "lone surrogate");
    REFUSED("\"\\udc00\"", "lone surrogate");
    REFUSED("\"\\u0000\"", "NUL");
    REFUSED("\"\\u12\"", "4 hexadecimal digits");
    REFUSED("\"\xC3\x28\"", "invalid UTF-8");
    REFUSED("\"\xED\xA0\x80\"", "invalid UTF-8"); /* a surrogate encoded in UTF-8 */
    REFUSED("\"abc", "not closed");
    REFUSED("[1 2]", "expected ',' or ']'");
    REFUSED("{\"a\" 1}", "expected ':'");
    REFUSED("// c\n1", "expected a value");
    REFUSED("tru", "expected a value");
    REFUSED("[1, NaN]", "expected a value");
    /* nesting: JSON_MAX_DEPTH levels are read, one more is refused (no stack overflow) */
    char deep[2 * (JSON_MAX_DEPTH + 2) + 1];
    for (int extra = 0; extra <= 1; extra++) {
        int d = JSON_MAX_DEPTH + extra;
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        json_value v;
        char msg[200] = "";
        int rc = json_parse(deep, 2 * (size_t)d, &v, msg, sizeof msg);
        if (extra) {
            T_EQ_INT(rc, -1);
            T_CONTAINS(msg, "nested deeper");
        } else {
            T_EQ_INT(rc, 0);
            json_free(&v);
        }
    }
    /* an embedded NUL byte in the text is not whitespace */
    refused("[1]\0", 4, "bytes after the value");
}

int main(void)
{
    test_values();
    test_refusals();
    printf("ok\n");
    return 0;
}
