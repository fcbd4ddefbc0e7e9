/* SPDX-License-Identifier: Apache-2.0 */
/* The one table of options (src/common/config.c), as the public API reads it: every option
 * has a name, a one-line doc, a type, the objects it applies to; stoker_option_describe's
 * range and enum are what stoker_config_set_int takes, and a new config holds a default
 * inside that range. What the table's rows must also appear in (stoker.h, the Python
 * binding, stoker-bench) is checked by tests/python/test_option_table.py. */
#include "testutil.h"

#include <string.h>

static void check_int_option(stoker_option opt, const char *name, int32_t values, int64_t min,
                             int64_t max)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    int64_t def = 0;
    T_OK(stoker_config_get_int(cfg, opt, &def));
    double f = 0;
    T_EQ_RC(stoker_config_get_float(cfg, opt, &f), STOKER_E_INVALID);
    if (!(min <= max && min <= def && def <= max))
        T_FAIL("%s: default %lld outside [%lld, %lld]", name, (long long)def, (long long)min,
               (long long)max);
    /* the ends of the range are taken, one past either end refused */
    T_OK(stoker_config_set_int(cfg, opt, min));
    T_OK(stoker_config_set_int(cfg, opt, max));
    if (min > INT64_MIN && min - 1 != 0)
        T_EQ_RC(stoker_config_set_int(cfg, opt, min - 1), STOKER_E_INVALID);
    if (min > 0) { /* 0 below the range: "the default" where the row says so, else refused */
        int64_t got = -1;
        const int rc = stoker_config_set_int(cfg, opt, 0);
        T_ASSERT(rc == 0 || rc == STOKER_E_INVALID);
        T_OK(stoker_config_get_int(cfg, opt, &got));
        T_EQ_INT(got, rc == 0 ? def : max);
    }
    if (max < INT64_MAX)
        T_EQ_RC(stoker_config_set_int(cfg, opt, max + 1), STOKER_E_INVALID);
    if (values) { /* every name of its enum is one of the library's; some value is taken */
        int32_t v = 0, taken = 0;
        for (int32_t i = 0; stoker_enum_at((stoker_enum)values, i, &v) == 0; i++) {
            const char *vn = stoker_enum_name((stoker_enum)values, v);
            T_ASSERT(vn != NULL);
            int32_t parsed = -1;
            T_OK(stoker_enum_parse((stoker_enum)values, vn, &parsed));
            T_EQ_INT(parsed, v);
            taken += stoker_config_set_int(cfg, opt, v) == 0;
        }
        if (!taken)
            T_FAIL("%s: its enum %d names no value it takes", name, values);
    }
    stoker_config_destroy(cfg);
}

/* Options whose doc calls 0 "the default" take it, though it lies below their range. */
static void check_zero_is_default(stoker_option opt, int64_t def)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, opt, 0));
    int64_t v = -1;
    T_OK(stoker_config_get_int(cfg, opt, &v));
    T_EQ_INT(v, def);
    stoker_config_destroy(cfg);
}

int main(void)
{
    check_zero_is_default(STOKER_OPT_BLOCK_SIZE, INT64_C(16) << 20);
    check_zero_is_default(STOKER_OPT_FETCH_TRANSFERS, 16);
    check_zero_is_default(STOKER_OPT_FETCH_WINDOW, INT64_C(512) << 20);
    check_zero_is_default(STOKER_OPT_FETCH_TIMEOUT_MS, 30000);
    int32_t opt = 0, n = 0;
    double distinct = 0.5; /* halved for each float: inside every float's range (vflip's 0..1) */
    stoker_config *floats = NULL;
    T_OK(stoker_config_create(&floats));
    for (int32_t i = 0; stoker_enum_at(STOKER_ENUM_OPTION, i, &opt) == 0; i++, n++) {
        const stoker_option o = (stoker_option)opt;
        const char *name = stoker_option_name(o);
        const char *doc = stoker_option_doc(o);
        T_ASSERT(name != NULL && *name);
        if (!doc || !*doc || strchr(doc, '\n') || !strstr(doc, "default"))
            T_FAIL("%s: its doc line must be one line naming its default, not '%s'", name,
                   doc ? doc : "(null)");
        int32_t parsed = -1;
        T_OK(stoker_enum_parse(STOKER_ENUM_OPTION, name, &parsed));
        T_EQ_INT(parsed, opt);

        int32_t type = -1, applies = -1, values = -1;
        int64_t min = 1, max = -1;
        T_OK(stoker_option_describe(o, &type, &applies, &values, &min, &max));
        T_OK(stoker_option_describe(o, NULL, NULL, NULL, NULL, NULL));
        if (applies <= 0 ||
            (applies & ~(STOKER_FOR_WRITER | STOKER_FOR_DATASET | STOKER_FOR_LOADER)))
            T_FAIL("%s: applies to %d", name, applies);
        if (type == STOKER_OPTION_INT) {
            check_int_option(o, name, values, min, max);
        } else if (type == STOKER_OPTION_FLOAT) {
            T_ASSERT(values == 0 && min == 0 && max == 0);
            double d = 0;
            T_OK(stoker_config_get_float(floats, o, &d));
            /* each float has a slot of its own: set them all, then read them back below */
            T_OK(stoker_config_set_float(floats, o, distinct));
            distinct /= 2;
        } else if (type == STOKER_OPTION_STRING) {
            T_ASSERT(values == 0 && min == 0 && max == 0);
            const char *s = NULL;
            T_OK(stoker_config_get_string(floats, o, &s));
            T_ASSERT(s != NULL);
        } else {
            T_FAIL("%s: type %d", name, type);
        }
    }
    T_ASSERT(n > 40);
    distinct = 0.5;
    for (int32_t i = 0; stoker_enum_at(STOKER_ENUM_OPTION, i, &opt) == 0; i++) {
        int32_t type = 0;
        T_OK(stoker_option_describe((stoker_option)opt, &type, NULL, NULL, NULL, NULL));
        double d = 0;
        if (type == STOKER_OPTION_FLOAT) {
            T_OK(stoker_config_get_float(floats, (stoker_option)opt, &d));
            T_ASSERT(d == distinct);
            distinct /= 2;
        }
    }
    /* string options keep their own slots too */
    T_OK(stoker_config_set_string(floats, STOKER_OPT_H5_IMAGES, "a"));
    T_OK(stoker_config_set_string(floats, STOKER_OPT_H5_LABELS, "b"));
    const char *a = NULL, *b = NULL;
    T_OK(stoker_config_get_string(floats, STOKER_OPT_H5_IMAGES, &a));
    T_OK(stoker_config_get_string(floats, STOKER_OPT_H5_LABELS, &b));
    T_EQ_STR(a, "a");
    T_EQ_STR(b, "b");
    stoker_config_destroy(floats);

    /* what the table says of a few options, and 0 meaning "the default" where it does */
    int32_t type = 0, applies = 0, values = 0;
    int64_t min = 0, max = 0;
    T_OK(stoker_option_describe(STOKER_OPT_DCT, &type, &applies, &values, &min, &max));
    T_EQ_INT(type, STOKER_OPTION_INT);
    T_EQ_INT(applies, STOKER_FOR_LOADER);
    T_EQ_INT(values, STOKER_ENUM_DCT);
    T_OK(stoker_option_describe(STOKER_OPT_MAX_RECORD_SIZE, NULL, &applies, &values, NULL, NULL));
    T_EQ_INT(applies, STOKER_FOR_WRITER | STOKER_FOR_DATASET | STOKER_FOR_LOADER);
    T_EQ_INT(values, 0);
    T_OK(stoker_option_describe(STOKER_OPT_H5_LABELS, &type, NULL, NULL, &min, &max));
    T_EQ_INT(type, STOKER_OPTION_STRING);
    T_CONTAINS(stoker_option_doc(STOKER_OPT_BATCH_SIZE), "default 256");
    /* units: bytes and milliseconds, else none (a count, a flag, a float) */
    T_EQ_INT(stoker_option_unit(STOKER_OPT_BLOCK_SIZE), STOKER_UNIT_BYTES);
    T_EQ_INT(stoker_option_unit(STOKER_OPT_MAX_CACHE), STOKER_UNIT_BYTES);
    T_EQ_INT(stoker_option_unit(STOKER_OPT_FETCH_TIMEOUT_MS), STOKER_UNIT_MS);
    T_EQ_INT(stoker_option_unit(STOKER_OPT_FETCH_RETRIES), 0);
    T_EQ_INT(stoker_option_unit(STOKER_OPT_MEAN_R), 0);
    T_EQ_INT(stoker_option_unit((stoker_option)110), 0);
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    int64_t v = 0;
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_READ_AHEAD, 0));
    T_OK(stoker_config_get_int(cfg, STOKER_OPT_READ_AHEAD, &v));
    T_EQ_INT(v, 64);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_get_int(cfg, STOKER_OPT_SHUFFLE, &v));
    T_EQ_INT(v, 0);
    T_EQ_RC(stoker_config_set_int(cfg, STOKER_OPT_ALIGN, 513), STOKER_E_INVALID);
    /* a float's range: a probability from 0 to 1, a std above 0 */
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_VFLIP, 1.0));
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_VFLIP, 1.0000001), STOKER_E_INVALID);
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_VFLIP, -0.0001), STOKER_E_INVALID);
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_STD_R, 0.0), STOKER_E_INVALID);
    /* the crop's scale: a share of the area, above 0 and at most 1; its ratio above 0 */
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_SCALE_MIN, 1.0));
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_SCALE_MAX, 1.0000001), STOKER_E_INVALID);
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_SCALE_MIN, 0.0), STOKER_E_INVALID);
    T_EQ_RC(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MIN, 0.0), STOKER_E_INVALID);
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MAX, 16.0));
    stoker_config_destroy(cfg);

    /* an unknown option: NULL, STOKER_E_INVALID, nothing written */
    T_ASSERT(stoker_option_doc((stoker_option)110) == NULL);
    type = 12345;
    T_EQ_RC(stoker_option_describe((stoker_option)110, &type, NULL, NULL, NULL, NULL),
            STOKER_E_INVALID);
    T_EQ_INT(type, 12345);
    return 0;
}
