/* SPDX-License-Identifier: Apache-2.0 */
/* What stoker-pack and stoker-bench share: one option parser (getopt_long underneath), so
 * that both accept the same syntax (--name VALUE, --name=VALUE, unambiguous prefixes, -h for
 * --help, -- before operands, options anywhere) and word their usage errors alike; value
 * parsers whose errors name the option, the value and what was expected; and printing of
 * names that come from the user or a file system with control characters escaped. */
#ifndef STOKER_TOOLS_CLI_H
#define STOKER_TOOLS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The exit status of a usage error, in both tools. */
enum { CLI_USAGE = 2 };

/* Names the tool ("stoker-pack") in every message below; call before anything else. */
void cli_init(const char *tool);

/* Writes s with control characters, DEL and backslashes escaped as in the manifest
 * (\n, \t, \xHH, \\), so that no name can move the cursor or recolour a terminal. */
void cli_put_escaped(FILE *f, const char *s);

/* Writes s as a JSON string: quotes, backslashes and control bytes escaped; bytes that are
 * not valid UTF-8 become U+FFFD, so that the output is always valid JSON. */
void cli_put_json_string(FILE *f, const char *s);

/* Prints "TOOL: " + message to stderr, the whole message escaped: every name in it may
 * come from the user, a file system or a data set. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: the message as cli_err prints it, then where the options are listed.
 * Returns -1. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The next option of argv, through getopt_long over `options` (long options only; give
 * --help the value 'h' to have -h too). Returns the option's value with *name set to its
 * long name and *arg to its value (NULL for a flag); CLI_END after the last option (optind
 * is then the first operand); CLI_ERROR after reporting an unknown or ambiguous option, a
 * missing value or a value given to a flag (a usage error). */
enum { CLI_END = -1, CLI_ERROR = -2 };
int cli_next(int argc, char **argv, const struct option *options, const char **name,
             const char **arg);

/* A decimal integer, silently: true and *v set, or false. */
bool cli_parse_int(const char *s, int64_t *v);

/* Value parsers: 0 and *v set, or -1 after a usage error naming the option, the value and
 * what is expected. Integers are decimal. */
int cli_int(const char *name, const char *arg, int64_t lo, int64_t hi, int64_t *v);
int cli_u64(const char *name, const char *arg, uint64_t *v);
/* Bytes > 0, with K, M, G or T (powers of 1024), optionally followed by B or iB. */
int cli_size(const char *name, const char *arg, int64_t *v);
int cli_double(const char *name, const char *arg, double lo, double hi, double *v);
/* The usage error the parsers give; `expected` completes "expected ...". Returns -1. */
int cli_bad_value(const char *name, const char *arg, const char *expected);

#endif
